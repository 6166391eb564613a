//! What `--json` prints: one JSON object per line, in the shapes docs/cli-json.md lists —
//! the daemon's own event objects where a result is an event (a generation's end, its
//! start), small objects of named members otherwise; never a raw protocol reply with its
//! `id` and `ok`.

use super::dispatch::{write_stdout, CommandError};
use crate::proto::json::{Object, Value};

/// Prints `obj` as one line.
pub fn print(obj: Object) -> Result<(), CommandError> {
    let mut line = Value::Object(obj).to_bytes();
    line.push(b'\n');
    write_stdout(&line)
}

/// A reply's members without the envelope (`id`, `ok`).
pub fn without_envelope(reply: &Object) -> Object {
    let mut out = Object::new();
    for (k, v) in reply.iter() {
        if k != "id" && k != "ok" {
            out.insert(k, v.clone());
        }
    }
    out
}

/// `{"session": .., "gen": ..}` and any further members.
pub fn session_gen(session: &str, gen: u64) -> Object {
    let mut o = Object::new();
    o.insert("session", session);
    o.insert("gen", gen);
    o
}
