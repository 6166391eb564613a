//! A stopped leader (`kill -STOP`, a debugger, job control) is woken by every stop: its
//! stop signal is followed at once by SIGCONT, through the same leader handle, so that it
//! runs its handler instead of waiting out the grace with the signal pending.

use super::harness::{spec, Harness};
use crate::core::signal::{SIGCONT, SIGINT, SIGKILL, SIGSTOP, SIGTERM, SIGTSTP};
use crate::core::{Action, Command, ExitCause, ExitStatus, Input, OnBusy, Scope, Spec};

/// The signals asked for `gen`, in order, with their scopes.
fn signals(actions: &[Action], gen: u64) -> Vec<(i32, Scope)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Signal {
                gen: g,
                signal,
                scope,
            } if *g == gen => Some((*signal, *scope)),
            _ => None,
        })
        .collect()
}

/// The position of the first action asking `signal` for `gen`.
fn position(actions: &[Action], gen: u64, signal: i32) -> usize {
    actions
        .iter()
        .position(
            |a| matches!(a, Action::Signal { gen: g, signal: s, .. } if *g == gen && *s == signal),
        )
        .unwrap_or_else(|| panic!("no signal {signal} for {gen} in {actions:?}"))
}

fn with_stop_signal(signal: i32) -> Spec {
    let mut s = spec();
    s.stop_signal = signal;
    s
}

#[test]
fn a_stop_sends_sigcont_to_the_leader_right_after_its_stop_signal() {
    for stop_signal in [SIGTERM, SIGINT] {
        let mut h = Harness::new();
        let g = h
            .spawn_with("s", with_stop_signal(stop_signal), OnBusy::Replace)
            .unwrap();
        h.started(g);
        let before = h.log.len();
        h.stop("s", Some(g)).unwrap();
        let asked = &h.log[before..];
        assert_eq!(
            signals(asked, g),
            vec![(stop_signal, Scope::Leader), (SIGCONT, Scope::Leader)]
        );
        // Adjacent: nothing comes between the stop signal and its SIGCONT.
        assert_eq!(
            position(asked, g, SIGCONT),
            position(asked, g, stop_signal) + 1
        );
        // The grace runs as before; the SIGKILL that ends it is not followed by SIGCONT.
        let kill = h.advance(100);
        assert_eq!(signals(&kill, g), vec![(SIGKILL, Scope::Leader)]);
        // The woken leader ran its handler and ended: a graceful stop, not a kill.
        h.ends(g, ExitStatus::Code(0));
        let ends: Vec<_> = h
            .events_of(g)
            .into_iter()
            .filter(|e| e.is_terminal())
            .collect();
        assert!(
            matches!(
                ends[..],
                [crate::core::Event::Exited {
                    cause: ExitCause::Stopped,
                    ..
                }]
            ),
            "{ends:?}"
        );
        h.settle();
    }
}

#[test]
fn a_stop_signal_that_stops_or_kills_by_itself_is_not_followed_by_sigcont() {
    for stop_signal in [SIGSTOP, SIGTSTP, SIGKILL, SIGCONT] {
        let mut h = Harness::new();
        let g = h
            .spawn_with("s", with_stop_signal(stop_signal), OnBusy::Replace)
            .unwrap();
        h.started(g);
        let before = h.log.len();
        h.stop("s", Some(g)).unwrap();
        assert_eq!(
            signals(&h.log[before..], g),
            vec![(stop_signal, Scope::Leader)],
            "stop signal {stop_signal}"
        );
        h.settle();
    }
}

/// Every way a stop begins wakes the leader: a replacement, a stop asked while it was
/// starting, a second shutdown's kill excepted (SIGKILL needs no waking).
#[test]
fn every_stop_sequence_wakes_the_leader_and_a_kill_does_not() {
    // Replaced: the old generation's stop.
    let mut h = Harness::new();
    let old = h.spawn("s");
    h.started(old);
    let before = h.log.len();
    let new = h.spawn("s");
    assert_ne!(new, old);
    assert_eq!(
        signals(&h.log[before..], old),
        vec![(SIGTERM, Scope::Leader), (SIGCONT, Scope::Leader)]
    );
    h.settle();

    // Stopped while starting: the stop begins, with its SIGCONT, once it runs.
    let mut h = Harness::new();
    let g = h.spawn("s");
    h.stop("s", Some(g)).unwrap();
    assert!(signals(&h.log, g).is_empty());
    let started = h.started(g);
    assert_eq!(
        signals(&started, g),
        vec![(SIGTERM, Scope::Leader), (SIGCONT, Scope::Leader)]
    );
    h.settle();

    // Shut down twice: the second is SIGKILL to the tree, with no SIGCONT after it.
    let mut h = Harness::new();
    let g = h.spawn("s");
    h.started(g);
    h.cmd(Command::Shutdown).unwrap();
    let before = h.log.len();
    h.cmd(Command::Shutdown).unwrap();
    let kill = signals(&h.log[before..], g);
    assert!(
        !kill.is_empty() && kill.iter().all(|(s, _)| *s == SIGKILL),
        "{kill:?}"
    );
    h.settle();
}

/// A client's own `signal` is sent as asked: `signal STOP` stops the leader (nothing wakes
/// it), and a `signal TERM` is not a stop. Only the stop sequence adds the SIGCONT.
#[test]
fn a_clients_signal_is_sent_alone() {
    let mut h = Harness::new();
    let g = h.spawn("s");
    h.started(g);
    for signal in [SIGSTOP, SIGTERM] {
        let before = h.log.len();
        h.cmd(Command::Signal {
            session: "s".into(),
            if_gen: None,
            signal,
            scope: Scope::Leader,
        })
        .unwrap();
        assert_eq!(signals(&h.log[before..], g), vec![(signal, Scope::Leader)]);
    }
    // Stopped by the client, then stopped: woken by the stop.
    let before = h.log.len();
    h.stop("s", Some(g)).unwrap();
    assert_eq!(
        signals(&h.log[before..], g),
        vec![(SIGTERM, Scope::Leader), (SIGCONT, Scope::Leader)]
    );
    h.input(Input::LeaderExited {
        gen: g,
        status: ExitStatus::Signal(SIGTERM),
    });
    h.settle();
}
