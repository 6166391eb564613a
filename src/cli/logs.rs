//! `genward logs NAME [-f] [--gen N] [-n LINES] [--since WHEN] [--timestamps]
//! [--follow-restarts] [--lossless]`: the output the daemon still holds, then (with `-f`)
//! new output as it comes. With `--lossless` the subscription is lossless (see
//! docs/protocol.md): a recorder piping this into a slow sink gets every byte, the process
//! waiting for it, unless it stalls past the bound and is demoted.
//!
//! The child's standard output goes to ours, its standard error to ours, a PTY's single
//! stream to standard output; bytes are passed through exactly (unless `--timestamps`
//! prefixes each line with the time its first byte was read). The end of the replay is
//! found by sending one more request after subscribing, whose answer the daemon queues
//! behind the whole replay (however much longer than its queue for this client): every
//! record before that answer is the retained log.
//!
//! Following (`-f`) ends when the generation followed ends — the one running when the
//! replay ended, or else the next to start — unless `--follow-restarts`, which follows
//! every generation that comes after it until the session is removed. Between
//! generations a marker line goes to standard error.
//!
//! With `--json` and following, each generation's `spawned` and end are printed where
//! they come among its output frames, the replayed ones too: the replay reaches past the
//! records retained when it began (it is sent as it is read, up to the marker's answer),
//! so a generation that started and ended while it was read is only in the replay.

mod print;
mod when;

use std::process::ExitCode;

use super::args::Matches;
use super::client::{objects_of, response_for, u64_of, Connection};
use super::dispatch::{gen_arg, session_arg, write_stderr, CommandError, CommandResult, Context};
use super::wait::{describe, end_of_wait, last_end};
use crate::core::Command;
use crate::proto::event::{Demotion, End, SessionState, WireEvent};
use crate::proto::framing::Message;
use crate::proto::json::{Object, Value};
use crate::proto::request::{Lossless, Op, Replay, Target};
use print::Printer;

/// What `logs` shows and for how long.
struct Options {
    session: String,
    only: Option<u64>,
    follow: bool,
    follow_restarts: bool,
    since_ms: Option<u64>,
    /// JSON lines (docs/cli-json.md) instead of the bytes and markers.
    json: bool,
}

impl Options {
    /// Whether following ends with the end of generation `gen`: the one asked for by
    /// number, or the one followed (unless restarts are followed too).
    fn ends_with(&self, followed: Option<u64>, gen: u64) -> bool {
        self.only == Some(gen) || (followed == Some(gen) && !self.follow_restarts)
    }
}

/// The generations a `get` answer knows for its session: current, live, recent ends.
fn known_gens(snap: &Object) -> Vec<u64> {
    let Some(s) = snap.get("session").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut gens: Vec<u64> = u64_of(s, "current").into_iter().collect();
    for key in ["generations", "recent_ends"] {
        gens.extend(
            objects_of(s, key)
                .into_iter()
                .filter_map(|g| u64_of(g, "gen")),
        );
    }
    if let Ok(Some(end)) = last_end(snap) {
        gens.push(end.gen());
    }
    gens.sort_unstable();
    gens.dedup();
    gens
}

/// The generations a `get` answer lists as live (running, stopping, draining).
fn live_gens(snap: &Object) -> Vec<u64> {
    snap.get("session")
        .and_then(Value::as_object)
        .map(|s| {
            objects_of(s, "generations")
                .into_iter()
                .filter_map(|g| u64_of(g, "gen"))
                .collect()
        })
        .unwrap_or_default()
}

fn current(snap: &Object) -> Option<u64> {
    snap.get("session")
        .and_then(Value::as_object)
        .and_then(|s| u64_of(s, "current"))
}

/// `genward logs`.
pub fn logs(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let o = Options {
        session: session_arg(m)?,
        only: gen_arg(m, "gen")?,
        follow: m.flag("follow") || m.flag("follow-restarts"),
        follow_restarts: m.flag("follow-restarts"),
        since_ms: m.value_with("since", |v| when::parse_since(v, now_ms))?,
        json: m.flag("json"),
    };
    if m.flag("lossless") && !o.follow {
        // Without following nothing waits for this reader: the flag would be ignored.
        return Err(m.requires("--lossless", "-f or --follow-restarts").into());
    }
    let lines = m.value_with("lines", |v| {
        v.parse::<usize>()
            .map_err(|_| "expected a number of lines such as 20")
    })?;
    let markers = o.only.is_none().then(|| o.session.clone());
    let mut printer = Printer::new(m.flag("timestamps"), lines, o.json, markers);
    let mut conn = ctx.connect()?;
    let snap = conn.request(&Op::Core(Command::Get {
        session: o.session.clone(),
    }))?;
    let known = known_gens(&snap);
    conn.request(&Op::Subscribe {
        target: Target::Session(o.session.clone()),
        replay: o.only.map_or(Replay::Start, Replay::Gen),
        lossless: m.flag("lossless").then(Lossless::default),
    })?;
    // Answered after every replayed record.
    let marker = conn.send(&Op::Core(Command::Get {
        session: o.session.clone(),
    }))?;
    replay(&mut conn, &o, marker, &known, &mut printer)
}

/// Prints the retained output, then follows if asked.
fn replay(
    conn: &mut Connection,
    o: &Options,
    marker: u64,
    known: &[u64],
    printer: &mut Printer,
) -> CommandResult {
    let mut seen_only = false;
    // The generation whose end ends `-f`, once the replay is over.
    let mut followed: Option<u64> = None;
    // The `wait` asked for the followed generation's end: answered after its `exited`
    // event on this connection — or after the `dropped` that swallowed it, when the
    // session's log moved past this reader (then only the answer tells the end).
    let mut end_asked: Option<u64> = None;
    let mut live = false;
    loop {
        // The replay comes at once, up to the marker's answer; what follows it takes as
        // long as the session runs.
        let msg = if live {
            conn.next_message()?
        } else {
            conn.next_message_bounded()?
        };
        if let Some(id) = end_asked {
            if let Some(resp) = response_for(&msg, id) {
                return followed_end(o, resp);
            }
        }
        if !live {
            if let Some(resp) = response_for(&msg, marker) {
                let resp = resp?;
                live = true;
                printer.end_of_replay()?;
                if let Some(g) = o.only.filter(|g| !seen_only && !known.contains(g)) {
                    return Err(CommandError::Failed(format!(
                        "{}: no generation {g} that genward knows of or holds output of (known: {})",
                        o.session,
                        list(known)
                    )));
                }
                if !o.follow {
                    return Ok(ExitCode::SUCCESS);
                }
                followed = o.only.or_else(|| current(&resp));
                // A generation asked for by number that no longer runs has nothing more
                // to say.
                if let Some(g) = o.only {
                    let live_gens = live_gens(&resp);
                    if !live_gens.contains(&g) {
                        return Ok(ExitCode::SUCCESS);
                    }
                }
                end_asked = ask_end(conn, o, followed)?;
                continue;
            }
        }
        let Message::Event(ev) = &msg else { continue };
        match ev {
            WireEvent::Output(frame) => {
                if o.only.is_some_and(|g| g != frame.gen) {
                    continue;
                }
                seen_only = true;
                if o.since_ms.is_some_and(|s| frame.t.is_none_or(|t| t < s)) {
                    continue;
                }
                if o.json {
                    printer.json_frame(frame)?;
                    continue;
                }
                printer.frame(frame.gen, frame.stream, frame.t, &frame.data)?;
            }
            // Replayed as well as live: a generation that started, or ended, while the
            // replay was being read has its events among the replayed records (the
            // replay runs on past the records retained when it began, up to the marker's
            // answer), and they are nowhere else.
            WireEvent::Dropped { .. }
            | WireEvent::Spawned { .. }
            | WireEvent::Exited { .. }
            | WireEvent::SpawnFailed { .. }
                if o.json && (o.follow || matches!(ev, WireEvent::Dropped { .. })) =>
            {
                if o.only.is_none_or(|g| ev.gen() == Some(g)) || ev.gen().is_none() {
                    printer.json_event(crate::cli::events::event_object(ev))?;
                }
                // Until the replay is over, the marker's answer says what is followed.
                if !live {
                    continue;
                }
                if ev.end().is_some_and(|end| o.ends_with(followed, end.gen())) {
                    return Ok(ExitCode::SUCCESS);
                }
                if let WireEvent::Spawned { gen, .. } = ev {
                    if followed.is_none() {
                        followed = Some(*gen);
                        end_asked = ask_end(conn, o, followed)?;
                    }
                }
            }
            WireEvent::Dropped { from, to, .. } => {
                let n = to.saturating_sub(*from);
                printer.gap()?;
                write_stderr(
                    format!("[genward: {n} bytes of output were dropped here]\n").as_bytes(),
                )?;
            }
            WireEvent::Demoted { pos, reason, .. } => {
                let why = match reason {
                    Demotion::Stalled => "this reader stalled",
                    Demotion::Removing => "the session is being removed",
                };
                write_stderr(
                    format!("[genward: no longer lossless from byte {pos}: {why}]\n").as_bytes(),
                )?;
            }
            WireEvent::Spawned { gen, pid, .. } if live => {
                if o.only.is_none() {
                    write_stderr(
                        format!("[genward: {} gen {gen} started, pid {pid}]\n", o.session)
                            .as_bytes(),
                    )?;
                    printer.announced(*gen);
                }
                if followed.is_none() {
                    followed = Some(*gen);
                    end_asked = ask_end(conn, o, followed)?;
                }
            }
            WireEvent::Exited { .. } | WireEvent::SpawnFailed { .. } if live => {
                let Some(end) = ev.end() else { continue };
                if o.only.is_none_or(|g| g == end.gen()) {
                    say_end(o, &end)?;
                }
                if o.ends_with(followed, end.gen()) {
                    return Ok(ExitCode::SUCCESS);
                }
            }
            WireEvent::State {
                state: SessionState::Removed,
                ..
            } if live => return Ok(ExitCode::SUCCESS),
            _ => {}
        }
    }
}

/// Asks for the end of the generation followed, unless following goes on past it
/// (`--follow-restarts`): returns the request's id.
fn ask_end(
    conn: &mut Connection,
    o: &Options,
    followed: Option<u64>,
) -> Result<Option<u64>, CommandError> {
    let Some(gen) = followed.filter(|_| o.only.is_some() || !o.follow_restarts) else {
        return Ok(None);
    };
    let id = conn.send(&Op::Wait {
        session: o.session.clone(),
        gen: Some(gen),
    })?;
    Ok(Some(id))
}

/// The answer to [`ask_end`]: the generation followed has ended (its `exited` event was
/// not seen, or following would have stopped there): said, and following stops.
fn followed_end(
    o: &Options,
    resp: Result<crate::proto::json::Object, super::client::ClientError>,
) -> CommandResult {
    let resp = match resp {
        Ok(resp) => resp,
        // Ended long enough ago that the daemon forgot how: nothing more to follow.
        Err(e) if e.code() == Some("not_running") => return Ok(ExitCode::SUCCESS),
        Err(e) => return Err(e.into()),
    };
    if o.json {
        if let Some(end) = resp.get("end").and_then(Value::as_object) {
            if let Ok(ev) = WireEvent::decode(end) {
                crate::cli::json_out::print(crate::cli::events::event_object(&ev))?;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    say_end(o, &end_of_wait(&resp)?)?;
    Ok(ExitCode::SUCCESS)
}

/// The marker line for a generation's end, on standard error.
fn say_end(o: &Options, end: &End) -> Result<(), CommandError> {
    let line = format!(
        "[genward: {} gen {}: {}]\n",
        o.session,
        end.gen(),
        describe(end)
    );
    write_stderr(line.as_bytes())
}

fn list(gens: &[u64]) -> String {
    if gens.is_empty() {
        return "none".into();
    }
    gens.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::json::parse;

    #[test]
    fn known_generations_come_from_every_part_of_a_get_answer() {
        let v = parse(
            br#"{"id":1,"ok":true,"session":{"name":"s","current":9,"generations":[{"gen":8},{"gen":9}],"recent_ends":[{"event":"exited","session":"s","gen":5,"code":0,"signal":null,"cause":"exited","discarded":0,"truncated":false}]}}"#,
        )
        .unwrap();
        assert_eq!(known_gens(v.as_object().unwrap()), [5, 8, 9]);
    }
}
