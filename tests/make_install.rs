//! `make install DESTDIR=...` puts every file where the README's Install section says,
//! and nothing else; the installed binary, page and scripts are the ones `genward` makes.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The paths (relative to PREFIX) listed in the README's Install section.
fn readme_paths() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let section = readme
        .split("\n## Install\n")
        .nth(1)
        .expect("an Install section");
    let block = section.split("```text\n").nth(1).unwrap();
    let block = block.split("```").next().unwrap();
    block
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(String::from)
        .collect()
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn make_install_puts_every_file_where_the_readme_says() {
    if Command::new("make").arg("--version").output().is_err() {
        eprintln!("SKIP make_install_puts_every_file_where_the_readme_says: make not installed");
        return;
    }
    let bin = env!("CARGO_BIN_EXE_genward");
    let dest = std::env::temp_dir().join(format!("gw-install-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dest);
    let out = Command::new("make")
        .arg("-C")
        .arg(env!("CARGO_MANIFEST_DIR"))
        .arg("-s")
        .arg("install")
        .arg(format!("DESTDIR={}", dest.display()))
        .arg(format!("BIN={bin}"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let prefix = dest.join("usr/local");
    let mut want: Vec<PathBuf> = readme_paths().iter().map(|p| prefix.join(p)).collect();
    assert_eq!(want.len(), 5, "{want:?}");
    let mut got = Vec::new();
    files_under(&dest, &mut got);
    want.sort();
    got.sort();
    assert_eq!(got, want);

    let read = |rel: &str| std::fs::read(prefix.join(rel)).unwrap();
    let genward = |args: &[&str]| Command::new(bin).args(args).output().unwrap().stdout;
    assert_eq!(read("bin/genward"), std::fs::read(bin).unwrap());
    assert_eq!(read("share/man/man1/genward.1"), genward(&["man"]));
    assert_eq!(
        read("share/bash-completion/completions/genward"),
        genward(&["completions", "bash"])
    );
    assert_eq!(
        read("share/zsh/site-functions/_genward"),
        genward(&["completions", "zsh"])
    );
    assert_eq!(
        read("share/fish/vendor_completions.d/genward.fish"),
        genward(&["completions", "fish"])
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = |rel: &str| {
        std::fs::metadata(prefix.join(rel))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("bin/genward"), 0o755);
    assert_eq!(mode("share/man/man1/genward.1"), 0o644);

    // And uninstall takes them all away again.
    let out = Command::new("make")
        .arg("-C")
        .arg(env!("CARGO_MANIFEST_DIR"))
        .arg("-s")
        .arg("uninstall")
        .arg(format!("DESTDIR={}", dest.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut left = Vec::new();
    files_under(&dest, &mut left);
    assert!(left.is_empty(), "{left:?}");
    std::fs::remove_dir_all(&dest).unwrap();
}
