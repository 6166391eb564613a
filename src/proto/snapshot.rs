//! Snapshots on the wire: the sessions of a `list` answer and the session of a `get`.
//!
//! Times in the core are milliseconds since the daemon started; on the wire they become
//! Unix milliseconds (`*_unix_ms`) so clients can show them without knowing our epoch.
//! A session's `last_end` is written (and read back) by [`End`], the same type a
//! terminal event's end is, so the two can never disagree.

use crate::core::{GenerationSnapshot, SessionSnapshot, Time};
use crate::proto::event::End;
use crate::proto::json::{write_array, ObjWriter};
use crate::proto::request::write_spec_object;

/// Converts core times to Unix milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// Unix milliseconds at core time zero.
    pub epoch_unix_ms: u64,
}

impl Clock {
    /// Core time `t` in Unix milliseconds.
    pub fn unix_ms(self, t: Time) -> u64 {
        self.epoch_unix_ms.saturating_add(t.as_millis())
    }
}

/// Appends one session's snapshot object.
pub fn session(s: &SessionSnapshot, clock: Clock, out: &mut Vec<u8>) {
    let mut w = ObjWriter::new(out);
    w.str("name", &s.name).str("state", s.state.as_str());
    match s.current {
        Some(g) => w.u64("current", g),
        None => w.null("current"),
    };
    w.u64("restarts", s.restarts.into());
    if let Some(t) = s.restart_at {
        w.u64("restart_at_unix_ms", clock.unix_ms(t));
    }
    if let Some(why) = &s.waiting {
        w.str("waiting", why);
    }
    match &s.last_end {
        Some(end) => w.with("last_end", |out| End::from(end).write(out)),
        None => w.null("last_end"),
    };
    w.with("generations", |out| {
        write_array(&s.generations, out, |g, out| generation(g, clock, out));
    });
    if let Some(detail) = &s.detail {
        w.with("recent_ends", |out| {
            write_array(&detail.recent_ends, out, |e, out| End::from(e).write(out));
        });
        // A spec the wire cannot carry was refused when it was spawned; should one be
        // here anyway, the session is still shown, with `spec: null`.
        let mut spec = Vec::new();
        match write_spec_object(&detail.spec, &mut spec) {
            Ok(()) => w.with("spec", |out| out.extend_from_slice(&spec)),
            Err(_) => w.null("spec"),
        };
    }
    w.finish();
}

fn generation(g: &GenerationSnapshot, clock: Clock, out: &mut Vec<u8>) {
    let mut w = ObjWriter::new(out);
    w.u64("gen", g.gen);
    match g.pid {
        Some(pid) => w.u64("pid", pid.into()),
        None => w.null("pid"),
    };
    w.str("lifecycle", g.lifecycle.as_str())
        .u64(
            "since_unix_ms",
            g.since_unix_ms.unwrap_or_else(|| clock.unix_ms(g.since)),
        )
        .bool("superseded", g.superseded);
    if let Some(cause) = g.cause {
        w.str("cause", cause.as_str());
    }
    // Left out once ready (the usual case: listings stay as short as they were).
    match &g.ready {
        crate::core::ReadyState::Ready => {}
        crate::core::ReadyState::Starting => {
            w.str("ready", "starting");
        }
        crate::core::ReadyState::Failed(why) => {
            w.str("ready", "ready_failed").str("ready_error", why);
        }
    }
    w.with("offsets", |out| {
        let mut o = ObjWriter::new(out);
        for (stream, n) in &g.offsets {
            o.u64(stream.as_str(), *n);
        }
        o.finish();
    })
    .u64("discarded", g.discarded)
    .u64("pending_input", g.pending_input as u64);
    if let Some(c) = g.containment {
        w.str("containment", c.as_str());
    }
    if let Some(adopted) = g.adopted {
        w.with("adopted", |out| {
            let mut a = ObjWriter::new(out);
            a.u64("since_unix_ms", clock.unix_ms(adopted.since))
                .bool("io_lost", adopted.io_lost)
                .bool("verified", adopted.verified);
            a.finish();
        });
    }
    w.finish();
}
