//! The `config/` directories of the setups in `examples/`, loaded as the daemon loads them
//! (`genward::config::load`, which decodes each `NAME.json` as strictly as a `spawn`
//! request and checks the dependencies across the set): each loads, runs the example
//! application's programs in the order its dependencies ask for, and every setup describes
//! the same application.

mod util;

use genward::config::{self, Entry};
use genward::core::{DependOn, ReadyHow};
use genward::testkit::scratch::ScratchDir;
use util::setup::example;

const SETUPS: [&str; 4] = ["container", "s6", "runit", "systemd"];

/// Where the setups install the example application (`examples/app`).
const APP_DIR: &str = "/srv/app/";

/// `setup`'s config, loaded by the daemon's loader.
#[track_caller]
fn load(setup: &str) -> Vec<Entry> {
    let dir = example(&format!("{setup}/config"));
    config::load(&dir).unwrap_or_else(|e| panic!("{setup}: {e}"))
}

#[test]
fn every_config_loads_and_runs_the_example_application() {
    for setup in SETUPS {
        let entries = load(setup);
        let names: Vec<&str> = entries.iter().map(|e| &*e.session.name).collect();
        assert_eq!(names, ["db", "web", "worker"], "{setup}");
        for e in &entries {
            let name = &e.session.name;
            let program = String::from_utf8(e.session.spec.argv[0].clone()).unwrap();
            let installed = program
                .strip_prefix(APP_DIR)
                .unwrap_or_else(|| panic!("{setup}/{name}: {program} is not the app's"));
            assert!(
                example("app").join(installed).is_file(),
                "{setup}/{name}: no {installed} in examples/app"
            );
        }
        let spec = |name: &str| {
            &entries
                .iter()
                .find(|e| &*e.session.name == name)
                .unwrap()
                .session
                .spec
        };
        assert_eq!(
            spec("db").ready.as_ref().map(|r| &r.how),
            Some(&ReadyHow::Output(b"ready".to_vec())),
            "{setup}: db is ready once it says so"
        );
        assert_eq!(
            spec("web").depends_on.get("db"),
            Some(&DependOn::Ready),
            "{setup}: web waits for db to be ready"
        );
        assert!(
            matches!(
                spec("web").ready.as_ref().map(|r| &r.how),
                Some(ReadyHow::Tcp(_))
            ),
            "{setup}: web is ready once it accepts connections"
        );
    }
}

#[test]
fn every_setup_describes_the_same_application() {
    let first = config::sessions(&load(SETUPS[0]));
    for setup in &SETUPS[1..] {
        assert_eq!(
            config::sessions(&load(setup)),
            first,
            "{setup} differs from {}",
            SETUPS[0]
        );
    }
}

/// The loader checks the set as a whole: a setup's config without the session web depends
/// on is refused, naming it. (So the loads above check the dependencies too.)
#[test]
fn a_config_missing_a_dependency_is_refused() {
    let scratch = ScratchDir::new("setup-configs-missing");
    for file in ["web.json", "worker.json"] {
        std::fs::copy(example("container/config").join(file), scratch.join(file)).unwrap();
    }
    let err = config::load(&scratch).expect_err("web depends on a missing db");
    assert!(err.file.ends_with("web.json"), "{err}");
    assert_eq!(err.field.as_deref(), Some("depends_on.db"), "{err}");
}
