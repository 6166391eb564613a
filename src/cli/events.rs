//! `genward events [--json]`: every event of every session as it happens.
//!
//! By default one line per event for people (`web gen 3: exit 143 (SIGTERM, stopped)`);
//! with `--json` the daemon's event objects, one per line, where an output event carries
//! its bytes as `data_b64`.

use super::args::Matches;
use super::dispatch::{write_stdout, CommandResult, Context};
use super::wait::describe as describe_end;
use crate::proto::base64;
use crate::proto::event::{Demotion, OutputFrame, WireEvent};
use crate::proto::framing::Message;
use crate::proto::json::{Object, Value};
use crate::proto::request::{Op, Replay, Target};

/// One line for people describing `msg`, without its newline.
pub fn describe(msg: &Message) -> String {
    let ev = match msg {
        Message::Event(ev) => ev,
        Message::Response(_) => return String::from_utf8_lossy(&to_json(msg)).into_owned(),
    };
    let session = ev.session();
    let gen = ev.gen().map_or_else(|| "-".into(), |g| g.to_string());
    match ev {
        WireEvent::Output(frame) => format!(
            "{session} gen {gen}: {} bytes on {}",
            frame.data.len(),
            frame.stream.as_str()
        ),
        WireEvent::Spawned { pid, .. } => format!("{session} gen {gen}: spawned, pid {pid}"),
        WireEvent::Exited { .. } | WireEvent::SpawnFailed { .. } => match ev.end() {
            Some(end) => format!("{session} gen {gen}: {}", describe_end(&end)),
            None => format!("{session} gen {gen}: {}", ev.name()),
        },
        WireEvent::State { state, .. } => format!("{session}: {} (gen {gen})", state.as_str()),
        WireEvent::Unkillable { .. } => {
            format!("{session} gen {gen}: unkillable (alive after SIGKILL; still tracked)")
        }
        WireEvent::InputClosed { .. } => format!("{session} gen {gen}: input closed"),
        WireEvent::Ready { .. } => format!("{session} gen {gen}: ready"),
        WireEvent::Unhealthy { failures, .. } => format!(
            "{session} gen {gen}: unhealthy ({failures} failed liveness probes in a row); stopping it"
        ),
        WireEvent::ReadyFailed { reason, .. } => {
            format!("{session} gen {gen}: readiness failed: {reason} (still running)")
        }
        WireEvent::Dropped { from, to, .. } => {
            format!("{session}: output bytes {from}..{to} dropped (this reader fell behind)")
        }
        WireEvent::Demoted { pos, reason, .. } => match reason {
            Demotion::Stalled => format!(
                "{session}: no longer lossless from output byte {pos} (this reader stalled)"
            ),
            Demotion::Removing => format!(
                "{session}: no longer lossless from output byte {pos} (the session is being removed)"
            ),
        },
    }
}

/// `msg` as one JSON line, without its newline: an event as the daemon wrote it (an
/// output frame with its payload as `data_b64`), a response as received.
pub fn to_json(msg: &Message) -> Vec<u8> {
    match msg {
        Message::Event(WireEvent::Output(frame)) => output_json(frame).to_bytes(),
        Message::Event(ev) => {
            let mut line = Vec::new();
            ev.write(&mut line);
            line.pop();
            line
        }
        Message::Response(obj) => Value::Object(obj.clone()).to_bytes(),
    }
}

/// An event as one JSON object (an output frame with its payload as `data_b64`).
pub fn event_object(ev: &WireEvent<'_>) -> Object {
    let bytes = match ev {
        WireEvent::Output(frame) => return output_object(frame),
        ev => {
            let mut line = Vec::new();
            ev.write(&mut line);
            line
        }
    };
    match crate::proto::json::parse(&bytes) {
        Ok(Value::Object(o)) => o,
        _ => Object::new(),
    }
}

fn output_json(frame: &OutputFrame<'_>) -> Value {
    Value::Object(output_object(frame))
}

fn output_object(frame: &OutputFrame<'_>) -> Object {
    let mut o = Object::new();
    o.insert("event", "output");
    o.insert("session", &*frame.session);
    o.insert("gen", frame.gen);
    o.insert("stream", frame.stream.as_str());
    o.insert("offset", frame.offset);
    o.insert("pos", frame.pos);
    if let Some(t) = frame.t {
        o.insert("t", t);
    }
    o.insert("len", frame.data.len() as u64);
    o.insert("data_b64", base64::encode(&frame.data));
    o
}

/// `genward events`.
pub fn events(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let json = m.flag("json");
    let mut conn = ctx.connect()?;
    conn.request(&Op::Subscribe {
        target: Target::All,
        replay: Replay::Now,
        lossless: None,
    })?;
    loop {
        let msg = conn.next_message()?;
        let mut line = if json {
            to_json(&msg)
        } else {
            describe(&msg).into_bytes()
        };
        line.push(b'\n');
        write_stdout(&line)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::framing::FrameDecoder;

    fn decode(bytes: &[u8]) -> Vec<Message> {
        let mut d = FrameDecoder::new();
        d.feed(bytes);
        std::iter::from_fn(|| d.next_message().map(Result::unwrap)).collect()
    }

    #[test]
    fn events_read_as_one_liners_and_json() {
        let msgs = decode(
            b"{\"event\":\"spawned\",\"session\":\"web\",\"gen\":3,\"pid\":77}\n\
              {\"event\":\"output\",\"session\":\"web\",\"gen\":3,\"stream\":\"stdout\",\"offset\":0,\"pos\":0,\"len\":3}\nhi\xff\n\
              {\"event\":\"exited\",\"session\":\"web\",\"gen\":3,\"code\":143,\"signal\":\"SIGTERM\",\"cause\":\"superseded\",\"discarded\":0,\"truncated\":false}\n\
              {\"event\":\"state\",\"session\":\"web\",\"gen\":null,\"state\":\"stopped\"}\n\
              {\"event\":\"exited\",\"session\":\"web\",\"gen\":4,\"code\":null,\"signal\":null,\"cause\":\"lost\",\"discarded\":0,\"truncated\":false}\n",
        );
        let lines: Vec<String> = msgs.iter().map(describe).collect();
        assert_eq!(
            lines,
            [
                "web gen 3: spawned, pid 77",
                "web gen 3: 3 bytes on stdout",
                "web gen 3: exit 143 (SIGTERM, superseded)",
                "web: stopped (gen -)",
                "web gen 4: lost (exit status unknown)",
            ]
        );
        assert_eq!(
            String::from_utf8(to_json(&msgs[2])).unwrap(),
            r#"{"event":"exited","session":"web","gen":3,"code":143,"signal":"SIGTERM","cause":"superseded","discarded":0,"truncated":false}"#
        );
        assert_eq!(
            String::from_utf8(to_json(&msgs[1])).unwrap(),
            r#"{"event":"output","session":"web","gen":3,"stream":"stdout","offset":0,"pos":0,"len":3,"data_b64":"aGn/"}"#
        );
    }
}
