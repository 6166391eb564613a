//! Config loading: both forms, and every error located by file, line, column and field.

use std::path::Path;

use super::*;
use crate::core::{OnBusy, Restart};

fn file_err(text: &str) -> ConfigError {
    decode_file(Path::new("genward.json"), text.as_bytes()).unwrap_err()
}

fn dir_err(name: &str, text: &str) -> ConfigError {
    decode_dir_entry(Path::new(&format!("{name}.json")), name, text.as_bytes()).unwrap_err()
}

#[test]
fn the_file_form_reads_every_session_with_the_spawn_vocabulary() {
    let text = r#"{"sessions": {
  "web": {"argv": ["srv", "--port", "8080"], "grace": "5s", "on_busy": "overlap",
          "restart": {"mode": "always"}},
  "db": {"argv": ["db"]}
}}"#;
    let entries = decode_file(Path::new("g.json"), text.as_bytes()).unwrap();
    let names: Vec<&str> = entries.iter().map(|e| &*e.session.name).collect();
    assert_eq!(names, ["web", "db"]);
    let web = &entries[0].session;
    assert_eq!(web.spec.argv[2], b"8080");
    assert_eq!(web.spec.grace, std::time::Duration::from_secs(5));
    assert_eq!(web.spec.restart.mode, Restart::Always);
    assert_eq!(web.on_busy, OnBusy::Overlap);
    assert_eq!(entries[1].session.on_busy, OnBusy::Replace);
}

#[test]
fn a_syntax_error_gives_line_and_column() {
    let e = file_err("{\"sessions\": {\n  \"web\": {\"argv\": [\"a\",]}\n}}");
    assert_eq!((e.at, e.field.as_deref()), (Some((2, 24)), None));
    assert_eq!(
        e.to_string(),
        "genward.json:2:24: invalid JSON: expected a value"
    );
}

#[test]
fn an_unknown_field_is_pointed_at_by_its_key() {
    let e = file_err(
        "{\"sessions\": {\n  \"web\": {\n    \"argv\": [\"a\"],\n    \"gracee\": 5\n  }\n}}",
    );
    assert_eq!(e.at, Some((4, 5)));
    assert_eq!(e.field.as_deref(), Some("sessions.web.gracee"));
    assert_eq!(e.problem, "unknown field");
    let e = file_err("{\"sessions\": {}, \"extra\": 1}");
    assert_eq!((e.at, e.field.as_deref()), (Some((1, 18)), Some("extra")));
}

#[test]
fn a_bad_value_is_pointed_at_by_its_value_in_the_decoders_words() {
    let e = dir_err("web", "{\n  \"argv\": [\"a\"],\n  \"grace\": \"5x\"\n}");
    assert_eq!(e.at, Some((3, 12)));
    assert_eq!(e.field.as_deref(), Some("grace"));
    assert!(e.to_string().starts_with("web.json:3:12: grace: "), "{e}");
}

#[test]
fn nested_fields_are_located_precisely() {
    let e = dir_err(
        "web",
        "{\"argv\": [\"a\"],\n \"restart\": {\"mode\": \"sometimes\"}}",
    );
    assert_eq!(e.at, Some((2, 22)));
    assert_eq!(e.field.as_deref(), Some("restart.mode"));
    assert!(e.problem.contains("`sometimes` is not one of"), "{e}");
    let e = dir_err("web", "{\"argv\": [\"a\", 7]}");
    assert_eq!((e.at, e.field.as_deref()), (Some((1, 16)), Some("argv[1]")));
    let e = dir_err("web", "{\"argv\": [\"a\"], \"restart\": {\"backoff\": 1}}");
    assert_eq!(e.field.as_deref(), Some("restart.backoff"));
    assert_eq!(e.at, Some((1, 29)));
    // A missing member is pointed at by its object.
    let e = file_err("{\"sessions\": {\"web\": {\"grace\": 5}}}");
    assert_eq!(e.field.as_deref(), Some("sessions.web.argv"));
    assert_eq!(e.at, Some((1, 22)));
}

#[test]
fn a_bad_session_name_and_a_duplicate_are_errors() {
    let e = file_err("{\"sessions\": {\n \"no/slash\": {\"argv\": [\"a\"]}}}");
    assert_eq!(e.at, Some((2, 2)));
    assert_eq!(e.field.as_deref(), Some("sessions.no/slash"));
    assert!(e.problem.contains("session name contains '/'"), "{e}");
    let e =
        file_err("{\"sessions\": {\n \"a\": {\"argv\": [\"x\"]},\n \"a\": {\"argv\": [\"y\"]}}}");
    assert_eq!(e.at, Some((3, 2)));
    assert_eq!(e.problem, "invalid JSON: duplicate key");
}

/// A fresh directory under the system's temporary directory, removed when dropped.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let n = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let path =
            std::env::temp_dir().join(format!("genward-config-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir(&path).unwrap();
        TempDir(path)
    }

    fn put(&self, name: &str, text: &str) {
        std::fs::write(self.0.join(name), text).unwrap();
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_directory_form_reads_name_json_files_and_skips_leftovers() {
    let dir = TempDir::new("dir");
    dir.put("web.json", r#"{"argv": ["srv"]}"#);
    dir.put("db.json", r#"{"argv": ["db"], "pty": true}"#);
    for skipped in [
        ".hidden.json",
        "web.json~",
        ".web.json.swp",
        "x.tmp",
        "db.json.dpkg-old",
    ] {
        dir.put(skipped, "not json");
    }
    let entries = load(&dir.0).unwrap();
    let names: Vec<&str> = entries.iter().map(|e| &*e.session.name).collect();
    assert_eq!(names, ["db", "web"]);
    assert_eq!(entries[1].file, dir.0.join("web.json"));
}

#[test]
fn the_directory_form_refuses_other_names() {
    let dir = TempDir::new("names");
    dir.put("web.json", r#"{"argv": ["srv"]}"#);
    dir.put("README", "hello");
    let e = load(&dir.0).unwrap_err();
    assert_eq!(e.file, dir.0.join("README"));
    assert!(e.problem.starts_with("not a NAME.json file"), "{e}");
    std::fs::remove_file(dir.0.join("README")).unwrap();
    dir.put("a b.json", r#"{"argv": ["srv"]}"#);
    let e = load(&dir.0).unwrap_err();
    assert_eq!(e.file, dir.0.join("a b.json"));
    assert!(e.problem.contains("session name contains ' '"), "{e}");
}

#[test]
fn a_bad_file_in_a_directory_names_itself() {
    let dir = TempDir::new("bad");
    dir.put("a.json", r#"{"argv": ["srv"]}"#);
    dir.put(
        "b.json",
        "{\"argv\": [\"srv\"],\n  \"stop_signal\": \"SIGNOPE\"}",
    );
    let e = load(&dir.0).unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "{}:2:18: stop_signal: ",
            dir.0.join("b.json").display()
        )),
        "{text}"
    );
}

#[test]
fn a_missing_path_and_a_large_file_are_errors() {
    let dir = TempDir::new("big");
    let e = load(&dir.0.join("nope.json")).unwrap_err();
    assert_eq!(e.at, None);
    dir.put("big.json", &" ".repeat(MAX_FILE_BYTES + 1));
    let e = load(&dir.0.join("big.json")).unwrap_err();
    assert!(e.problem.starts_with("larger than"), "{e}");
}

#[test]
fn the_shipped_examples_load() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/config");
    let file = load(&root.join("genward.json")).unwrap();
    let names: Vec<&str> = file.iter().map(|e| &*e.session.name).collect();
    assert_eq!(names, ["web", "agent", "worker"]);
    let dir = load(&root.join("genward.d")).unwrap();
    let names: Vec<&str> = dir.iter().map(|e| &*e.session.name).collect();
    assert_eq!(names, ["web", "worker"]);
    assert_eq!(dir[0].session, file[0].session, "one session, either form");
}

#[test]
fn the_example_in_operations_md_is_the_shipped_one() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/operations.md")).unwrap();
    let shipped = std::fs::read_to_string(root.join("examples/config/genward.json")).unwrap();
    assert!(
        doc.contains(&format!("```json\n{shipped}```")),
        "docs/operations.md's Config example differs from examples/config/genward.json"
    );
}

fn set_err(text: &str) -> ConfigError {
    let entries = decode_file(Path::new("genward.json"), text.as_bytes()).unwrap();
    set::check_whole_set(&entries).unwrap_err()
}

#[test]
fn a_dependency_on_a_session_the_configuration_lacks_is_an_error_naming_it() {
    let e = set_err(r#"{"sessions": {"web": {"argv": ["w"], "depends_on": {"db": "ready"}}}}"#);
    assert_eq!(e.field.as_deref(), Some("depends_on.db"));
    assert_eq!(
        e.to_string(),
        "genward.json: depends_on.db: \"db\" is not a session of the configuration"
    );
}

#[test]
fn a_dependency_cycle_is_an_error_naming_it() {
    let e = set_err(
        r#"{"sessions": {
  "a": {"argv": ["a"], "depends_on": {"b": "started"}},
  "b": {"argv": ["b"], "depends_on": {"c": "ready"}},
  "c": {"argv": ["c"], "depends_on": {"a": "completed"}},
  "d": {"argv": ["d"], "depends_on": {"a": "ready"}}
}}"#,
    );
    assert_eq!(e.field.as_deref(), Some("depends_on"));
    assert_eq!(e.problem, "dependency cycle: a -> b -> c -> a");
}

#[test]
fn dependencies_within_the_configuration_are_accepted() {
    let text = r#"{"sessions": {
  "db": {"argv": ["db"], "ready": {"output": "ready"}},
  "web": {"argv": ["w"], "depends_on": {"db": "ready"}}
}}"#;
    let entries = decode_file(Path::new("g.json"), text.as_bytes()).unwrap();
    set::check_whole_set(&entries).unwrap();
}
