//! `genward events [--json]`: every event of every session as it happens.
//!
//! By default one line per event for people (`web gen 3: exit 143 (SIGTERM, stopped)`);
//! with `--json` the daemon's event objects, one per line, where an output event carries
//! its bytes as `data_b64`.

use super::args::Matches;
use super::client::{args, event_of, str_of, u64_of};
use super::dispatch::{write_stdout, CommandResult, Context};
use super::wait::End;
use crate::proto::base64;
use crate::proto::framing::{Message, OutputFrame};
use crate::proto::json::{Object, Value};

/// One line for people describing `msg`, without its newline.
pub fn describe(msg: &Message) -> String {
    match msg {
        Message::Output(frame) => format!(
            "{} gen {}: {} bytes on {}",
            frame.session,
            frame.gen,
            frame.data.len(),
            frame.stream.as_str()
        ),
        Message::Json(v) => {
            let Some((name, ev)) = event_of(msg) else {
                return String::from_utf8_lossy(&v.to_bytes()).into_owned();
            };
            let session = str_of(ev, "session").unwrap_or("?");
            let gen = u64_of(ev, "gen").map_or_else(|| "-".into(), |g| g.to_string());
            match name {
                "spawned" => format!(
                    "{session} gen {gen}: spawned, pid {}",
                    u64_of(ev, "pid").map_or_else(|| "?".into(), |p| p.to_string())
                ),
                "exited" | "spawn_failed" => match End::from_event(ev) {
                    Some(end) => format!("{session} gen {gen}: {}", end.describe()),
                    None => format!("{session} gen {gen}: {name}"),
                },
                "state" => format!(
                    "{session}: {} (gen {gen})",
                    str_of(ev, "state").unwrap_or("?")
                ),
                "unkillable" => {
                    format!("{session} gen {gen}: unkillable (alive after SIGKILL; still tracked)")
                }
                "dropped" => format!(
                    "{session}: output bytes {}..{} dropped (this reader fell behind)",
                    u64_of(ev, "from").unwrap_or(0),
                    u64_of(ev, "to").unwrap_or(0)
                ),
                _ => String::from_utf8_lossy(&v.to_bytes()).into_owned(),
            }
        }
    }
}

/// `msg` as one JSON line, without its newline.
pub fn to_json(msg: &Message) -> Vec<u8> {
    match msg {
        Message::Json(v) => v.to_bytes(),
        Message::Output(frame) => output_json(frame).to_bytes(),
    }
}

fn output_json(frame: &OutputFrame<'_>) -> Value {
    let mut o = Object::new();
    o.insert("event", "output");
    o.insert("session", &*frame.session);
    o.insert("gen", frame.gen);
    o.insert("stream", frame.stream.as_str());
    o.insert("offset", frame.offset);
    o.insert("len", frame.data.len() as u64);
    o.insert("data_b64", base64::encode(&frame.data));
    Value::Object(o)
}

/// `genward events`.
pub fn events(m: &Matches<'_>, ctx: &Context) -> CommandResult {
    let json = m.flag("json");
    let mut conn = ctx.connect()?;
    conn.request("subscribe", args([("all", true.into())]))?;
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
              {\"event\":\"state\",\"session\":\"web\",\"gen\":null,\"state\":\"stopped\"}\n",
        );
        let lines: Vec<String> = msgs.iter().map(describe).collect();
        assert_eq!(
            lines,
            [
                "web gen 3: spawned, pid 77",
                "web gen 3: 3 bytes on stdout",
                "web gen 3: exit 143 (SIGTERM, superseded)",
                "web: stopped (gen -)",
            ]
        );
        assert_eq!(
            String::from_utf8(to_json(&msgs[1])).unwrap(),
            r#"{"event":"output","session":"web","gen":3,"stream":"stdout","offset":0,"len":3,"data_b64":"aGn/"}"#
        );
    }
}
