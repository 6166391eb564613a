//! The deadline index against the scan it replaced: many sessions backing off and
//! generations stopping at different times, the index read after every step.

use std::time::Duration;

use super::harness::{spec, Harness};
use crate::core::{Config, ExitStatus, OnBusy, Restart};

/// Sessions crash at staggered times and restart after staggered backoffs while others
/// are stopped with staggered graces: after each step the earliest deadline is the scan's
/// (the harness's checker compares them too), and jumping to it always finds work due.
#[test]
fn the_index_is_the_scan_while_many_timers_come_and_go() {
    let config = Config {
        max_sessions: 64,
        max_generations: 128,
        ..Config::default()
    };
    let mut h = Harness::with(config, 1);
    for i in 0..48u64 {
        let mut s = spec();
        s.restart.mode = Restart::Always;
        s.restart.initial = Duration::from_millis(5 + i * 7 % 40);
        s.grace = Duration::from_millis(10 + i * 13 % 50);
        let name = format!("s{i}");
        let gen = h.spawn_with(&name, s, OnBusy::Replace).unwrap();
        h.started(gen);
        if i % 3 == 0 {
            h.exit(gen, ExitStatus::Code(1));
            h.eof(gen);
        } else if i % 3 == 1 {
            h.stop(&name, None).unwrap();
        }
        h.advance(1);
        assert_eq!(h.core.next_deadline(), h.core.scan_deadline());
    }
    for _ in 0..200 {
        let Some(next) = h.core.next_deadline() else {
            break;
        };
        assert_eq!(Some(next), h.core.scan_deadline());
        let wait = next.as_millis().saturating_sub(h.now.as_millis());
        let fired = h.advance(wait);
        assert!(
            !fired.is_empty() || h.core.next_deadline() != Some(next),
            "a deadline at {next:?} fired nothing"
        );
    }
    assert_eq!(h.core.next_deadline(), h.core.scan_deadline());
}
