//! The whole session table, read page by page with the `list` op's paged form.
//!
//! Each page is a request of its own, asked for once the previous one is consumed, so the
//! client holds one page and the daemon queues one answer at a time, however large the
//! table. Pages follow each other by name (`after` is the previous page's `next`), so a
//! session created or removed meanwhile never makes another one appear twice.

use super::client::{ClientError, Connection};
use crate::core::Command;
use crate::proto::json::Value;
use crate::proto::list::PAGE_MAX;
use crate::proto::request::Op;

/// Where a listing is.
#[derive(Debug, Default)]
pub struct Pages {
    /// The `next` of the last page read: the next page starts after this name.
    after: Option<String>,
    /// Whether the last page was read.
    done: bool,
}

impl Pages {
    /// A listing from the first session on.
    pub fn new() -> Pages {
        Pages::default()
    }

    /// The next page's entries, or `None` once the last page was read.
    pub fn next(&mut self, conn: &mut Connection) -> Result<Option<Vec<Value>>, ClientError> {
        if self.done {
            return Ok(None);
        }
        let op = Op::ListPage {
            after: self.after.clone(),
            limit: PAGE_MAX,
        };
        let mut resp = match conn.request(&op) {
            // A daemon older than pages refuses their members: ask it the classic way,
            // for everything in one answer.
            Err(e) if self.after.is_none() && e.code() == Some("bad_request") => {
                self.done = true;
                let mut resp = conn.request(&Op::Core(Command::List))?;
                return sessions(&mut resp).map(Some);
            }
            other => other?,
        };
        let page = sessions(&mut resp)?;
        match resp.get("next") {
            None | Some(Value::Null) => self.done = true,
            // Names only ever move forward: anything else would loop or repeat sessions.
            Some(Value::Str(next)) if Some(next.as_str()) > self.after.as_deref() => {
                self.after = Some(next.clone());
            }
            Some(other) => {
                return Err(ClientError::Protocol(format!(
                    "list page answered with `next` {} after {:?}",
                    String::from_utf8_lossy(&other.to_bytes()),
                    self.after
                )))
            }
        }
        Ok(Some(page))
    }
}

fn sessions(resp: &mut super::client::Response) -> Result<Vec<Value>, ClientError> {
    match resp.remove("sessions") {
        Some(Value::Array(sessions)) => Ok(sessions),
        _ => Err(ClientError::Protocol(
            "list answered without `sessions`".into(),
        )),
    }
}
