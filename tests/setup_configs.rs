//! The `config/` directories of the setups in `examples/`: each `NAME.json` is a session's
//! spec as the `spawn` request spells it (decoded here by the protocol's own decoder, as
//! strictly as a request), plus its `ready` and `depends_on`; the programs they name are
//! the example application's; and every setup describes the same application, the one
//! `examples/app/start-sessions` starts.

mod util;

use std::collections::BTreeMap;

use serde_json::Value;
use util::setup::example;

const SETUPS: [&str; 4] = ["container", "s6", "runit", "systemd"];

/// Where the setups install the example application (`examples/app`).
const APP_DIR: &str = "/srv/app/";

/// Every `NAME.json` of `setup`'s config directory, by name.
fn config(setup: &str) -> BTreeMap<String, Value> {
    let dir = example(&format!("{setup}/config"));
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        assert_eq!(path.extension().and_then(|e| e.to_str()), Some("json"));
        let text = std::fs::read(&path).unwrap();
        let value: Value =
            serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        out.insert(name, value);
    }
    out
}

#[test]
fn every_config_is_a_spawn_spec_with_readiness_and_dependencies() {
    for setup in SETUPS {
        let sessions = config(setup);
        assert_eq!(
            sessions.keys().collect::<Vec<_>>(),
            ["db", "web", "worker"],
            "{setup}"
        );
        for (name, value) in &sessions {
            let mut spec = value.as_object().expect("one object").clone();
            if let Some(ready) = spec.remove("ready") {
                let kind = ready.as_object().and_then(|o| o.keys().next().cloned());
                assert!(
                    matches!(kind.as_deref(), Some("output" | "fd" | "tcp" | "command")),
                    "{setup}/{name}: ready {ready}"
                );
            }
            if let Some(deps) = spec.remove("depends_on") {
                for (dep, when) in deps.as_object().expect("depends_on is an object") {
                    assert!(
                        sessions.contains_key(dep),
                        "{setup}/{name}: no session {dep}"
                    );
                    assert_eq!(when, "ready", "{setup}/{name}");
                }
            }
            let text = serde_json::to_vec(&spec).unwrap();
            let parsed = genward::proto::json::parse(&text).unwrap();
            genward::proto::request::decode_spec_object(parsed.as_object().unwrap())
                .unwrap_or_else(|e| panic!("{setup}/{name}: {e:?}"));
            let program = spec["argv"][0].as_str().unwrap();
            let installed = program.strip_prefix(APP_DIR).expect("a program of the app");
            assert!(
                example("app").join(installed).is_file(),
                "{setup}/{name}: no {installed} in examples/app"
            );
        }
    }
}

#[test]
fn every_setup_describes_the_same_application() {
    let first = config(SETUPS[0]);
    for setup in &SETUPS[1..] {
        assert_eq!(config(setup), first, "{setup} differs from {}", SETUPS[0]);
    }
}
