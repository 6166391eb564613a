//! `list` answers, classic and paged: both bounded, so no table size can make a reply
//! exceed what a client is required to read.
//!
//! - The classic form (`{"op":"list"}`) answers with every session on one line. That line
//!   obeys the protocol's line limit ([`MAX_LINE`]): a table too large for it is answered
//!   with a `limit` error that names the paged form, instead of a line that clients must
//!   refuse (or that breaks their parser).
//! - The paged form (`{"op":"list","limit":N,"after":NAME}`) answers with at most `N`
//!   sessions (at most [`PAGE_MAX`]) whose names follow `NAME`, in name order, and
//!   `next`: the `after` of the next page, or `null` at the end. A page also stops once
//!   it holds [`PAGE_BYTES`], so each answer, and so the daemon's queue for a client that
//!   reads page after page, stays small whatever the sessions look like. Pages are keyed
//!   by name, not by position or a server-side cursor: nothing is kept between requests
//!   (nor carried across an upgrade), and a session created or removed meanwhile never
//!   makes another session appear twice.

use crate::core::SessionSnapshot;
use crate::proto::envelope::{begin_ok_response, RequestId};
use crate::proto::error::{write_error_response, ErrorCode, ProtoError};
use crate::proto::framing::MAX_LINE;
use crate::proto::json::write_str;
use crate::proto::snapshot::{session, Clock};

/// Sessions in a page when a request gives `after` without `limit`.
pub const PAGE_DEFAULT: usize = 100;

/// Most sessions in one page; a larger `limit` counts as this.
pub const PAGE_MAX: usize = 1_000;

/// A page ends with the session that takes its sessions past this many bytes (a page
/// holds at least one session): a quarter of the line limit.
pub const PAGE_BYTES: usize = MAX_LINE / 4;

/// Fewer bytes than any session takes in a list: the least there is to say of one,
/// `{"name":"x","state":"failed","current":null,"restarts":0,"last_end":null,"generations":[]}`,
/// is 89 (and a comma).
const MIN_SESSION_BYTES: usize = 80;

/// More sessions than this never fit in a classic answer: a daemon with more answers with
/// [`too_many`] at once, without building or encoding any of them.
pub const CLASSIC_MOST: usize = MAX_LINE / MIN_SESSION_BYTES;

/// The `limit` error of a classic `list` of `total` sessions that does not fit in a line.
pub fn too_many(total: usize) -> ProtoError {
    let why = format!(
        "the list of {total} sessions does not fit in one line of {MAX_LINE} bytes; \
         ask for it in pages: {{\"op\":\"list\",\"limit\":{PAGE_MAX}}}, then \
         \"after\": the `next` of each page"
    );
    ProtoError::new(ErrorCode::Limit, why)
}

/// Appends the classic answer: every session on one line, or, when that line would pass
/// [`MAX_LINE`], a `limit` error naming the paged form. At most the line limit plus one
/// session is ever encoded.
pub fn write_all(id: &RequestId, sessions: &[SessionSnapshot], clock: Clock, out: &mut Vec<u8>) {
    let start = out.len();
    let mut fits = true;
    let mut w = begin_ok_response(id, out);
    w.with("sessions", |out| {
        out.push(b'[');
        for (i, s) in sessions.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            session(s, clock, out);
            if out.len() - start > MAX_LINE {
                fits = false;
                return;
            }
        }
        out.push(b']');
    });
    w.finish();
    out.push(b'\n');
    if fits && out.len() - start - 1 <= MAX_LINE {
        return;
    }
    out.truncate(start);
    write_error_response(id, &too_many(sessions.len()), out);
}

/// Appends a page answer: `sessions` (a core page; `more` when sessions follow it) up to
/// [`PAGE_BYTES`], then `next`, the name of the last session shown when any follow it.
pub fn write_page(
    id: &RequestId,
    sessions: &[SessionSnapshot],
    more: bool,
    clock: Clock,
    out: &mut Vec<u8>,
) {
    let mut shown = 0;
    let mut w = begin_ok_response(id, out);
    w.with("sessions", |out| {
        let start = out.len();
        out.push(b'[');
        for (i, s) in sessions.iter().enumerate() {
            if i > 0 && out.len() - start >= PAGE_BYTES {
                break;
            }
            if i > 0 {
                out.push(b',');
            }
            session(s, clock, out);
            shown = i + 1;
        }
        out.push(b']');
    });
    let next = (more || shown < sessions.len())
        .then(|| sessions.get(shown.wrapping_sub(1)))
        .flatten();
    match next {
        Some(last) => w.with("next", |out| write_str(&last.name, out)),
        None => w.null("next"),
    };
    w.finish();
    out.push(b'\n');
}

#[cfg(test)]
mod tests;
