//! `Core::list_page` over a table of 100,000 sessions: every session exactly once, in name
//! order, while sessions are created and removed between pages.

use std::collections::BTreeSet;

use super::harness::spec;
use crate::core::{
    Command, Config, Core, Desired, Input, OnBusy, RestState, SessionRecord, Time, WallClock,
};

const SESSIONS: usize = 100_000;
const PAGE: usize = 1_000;

fn core() -> Core {
    let config = Config {
        max_sessions: 2 * SESSIONS,
        max_generations: 2 * SESSIONS,
        ..Config::default()
    };
    Core::new(config, 1)
}

/// Runs `command` straight through the core (the checker's per-step audit of the whole
/// table would make 100,000 sessions quadratic), dropping its actions.
fn tell(core: &mut Core, request: &mut u64, command: Command) {
    *request += 1;
    core.handle(
        Time::ZERO,
        Input::Command {
            request: *request,
            command,
        },
    );
    while core.poll_action().is_some() {}
}

fn spawn(core: &mut Core, request: &mut u64, name: &str) {
    let command = Command::Spawn {
        session: name.into(),
        if_gen: None,
        spec: Box::new(spec()),
        on_busy: OnBusy::Replace,
    };
    tell(core, request, command);
}

#[test]
fn pages_of_a_large_table_hold_every_session_once_under_churn() {
    let mut core = core();
    let mut request = 0;
    let name = |i: usize| format!("s{i:06}");
    // Stopped sessions, as a daemon restarting on a state directory loads them: spawning
    // each through a command would cost what every command costs in a table this size.
    let clock = WallClock {
        now: Time::ZERO,
        unix_ms: 1_700_000_000_000,
    };
    let records = (0..SESSIONS).map(|i| SessionRecord {
        name: name(i).into(),
        spec: spec(),
        origin: crate::core::Origin::Client,
        desired: Desired::Down,
        rest: RestState::Stopped,
        restarts: 0,
        restart_at_unix_ms: None,
        restart_uncounted: false,
        current: None,
        current_overlaps: false,
        stopped_by_shutdown: false,
        last_gen: None,
        last_end: None,
        recent_ends: Vec::new(),
        stops: Vec::new(),
    });
    assert!(core.restore(clock, records.collect()).is_empty());
    let mut seen: Vec<String> = Vec::new();
    let mut removed = BTreeSet::new();
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let (page, more) = core.list_page(after.as_deref(), PAGE);
        assert!(page.len() <= PAGE);
        pages += 1;
        seen.extend(page.iter().map(|s| s.name.to_string()));
        // Churn between pages: sessions created behind and ahead of the cursor, and
        // sessions removed on both sides of it.
        let n = pages * 7;
        spawn(&mut core, &mut request, &format!("a-new-{n}"));
        spawn(&mut core, &mut request, &format!("t-new-{n}"));
        let gone = name((n * 131) % SESSIONS);
        tell(
            &mut core,
            &mut request,
            Command::Remove {
                session: gone.clone(),
            },
        );
        removed.insert(gone);
        if !more {
            break;
        }
        after = Some(page.last().expect("a page before more").name.to_string());
    }
    assert!(pages > SESSIONS / PAGE, "{pages} pages");
    let unique: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "a session appeared twice");
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "pages out of name order"
    );
    for i in 0..SESSIONS {
        let n = name(i);
        assert!(removed.contains(&n) || unique.contains(&n), "{n} missing");
    }
}

#[test]
fn a_page_starts_after_its_cursor_even_when_the_cursor_is_gone() {
    let mut core = core();
    let mut request = 0;
    for n in ["a", "b", "c", "d"] {
        spawn(&mut core, &mut request, n);
    }
    let names = |page: &[crate::core::SessionSnapshot]| -> Vec<String> {
        page.iter().map(|s| s.name.to_string()).collect()
    };
    let (page, more) = core.list_page(None, 2);
    assert_eq!((names(&page), more), (vec!["a".into(), "b".into()], true));
    // The cursor names no session (never did, or removed since): the page starts at the
    // next name after it.
    let (page, more) = core.list_page(Some("bb"), 2);
    assert_eq!((names(&page), more), (vec!["c".into(), "d".into()], false));
    let (page, more) = core.list_page(Some("d"), 2);
    assert!(page.is_empty() && !more);
    assert_eq!(core.list_page(None, 10).0, core.list());
}
