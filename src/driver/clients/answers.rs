//! Answers queued on a connection: the core's replies (matched to the request that asked
//! through the core's request id), and what the daemon answers itself.

use super::Clients;
use crate::core::{Error as CoreError, Response, SessionSnapshot};
use crate::driver::log_sink::LogWriterStats;
use crate::proto::encode::{self, Clock};
use crate::proto::envelope::{begin_ok_response, RequestId};
use crate::proto::error::ProtoError;
use crate::proto::json::ObjWriter;
use crate::proto::list;

/// The protocol version `hello` reports.
pub const PROTOCOL_VERSION: u64 = 1;

impl Clients {
    /// Answers `rid` with an error.
    pub fn send_error(&mut self, id: u64, rid: &RequestId, error: &ProtoError) {
        let mut line = Vec::new();
        encode::error(rid, error, &mut line);
        self.push(id, &line);
    }

    /// Answers `rid` with a bare success.
    pub fn send_ok(&mut self, id: u64, rid: &RequestId) {
        let mut line = Vec::new();
        begin_ok_response(rid, &mut line).finish();
        line.push(b'\n');
        self.push(id, &line);
    }

    /// Answers a `list` page. Only that page is queued: a client reading the whole
    /// table asks page after page, and the daemon reads its next request only while its
    /// queue has room, so it never holds the table's encoding for anyone.
    pub fn send_page(
        &mut self,
        id: u64,
        rid: &RequestId,
        sessions: &[SessionSnapshot],
        more: bool,
        clock: Clock,
    ) {
        let mut line = Vec::new();
        list::write_page(rid, sessions, more, clock, &mut line);
        self.push(id, &line);
    }

    /// Answers a `reload` with its plan.
    pub fn send_plan(&mut self, id: u64, rid: &RequestId, plan: &crate::core::Plan, dry_run: bool) {
        let mut line = Vec::new();
        crate::proto::reload::write_plan_response(rid, plan, dry_run, &mut line);
        self.push(id, &line);
    }

    /// Answers `hello`: protocol version, capabilities, who the daemon is, and whether a
    /// keeper holds its children's descriptors (so that a crash loses nothing).
    pub fn send_hello(&mut self, id: u64, rid: &RequestId, keeper: bool, logs: LogWriterStats) {
        let mut line = Vec::new();
        let mut w = begin_ok_response(rid, &mut line);
        w.u64("protocol", PROTOCOL_VERSION)
            .str("version", env!("CARGO_PKG_VERSION"))
            .u64("pid", u64::from(std::process::id()))
            .str("identity", &self.hello.identity)
            .str("reaper", self.hello.reaper)
            .str("containment", self.hello.containment)
            .bool("keeper", keeper)
            .with("log_writer", |out| {
                let mut o = ObjWriter::new(out);
                match logs.pid {
                    Some(pid) => o.u64("pid", pid.into()),
                    None => o.null("pid"),
                };
                o.u64("restarts", logs.restarts)
                    .u64("dropped_bytes", logs.dropped_bytes);
                o.finish();
            })
            .with("capabilities", |out| {
                out.extend_from_slice(
                    br#"["pipes","pty","output_frames","replay","if_gen","wait","upgrade","list_pages","lossless","reload","quiet_write","attached_resize","spawn_if_gen"]"#,
                )
            });
        w.finish();
        line.push(b'\n');
        self.push(id, &line);
    }

    /// Answers an `upgrade` that succeeded: the version that runs now, the one before,
    /// and how long the loop did not serve.
    pub fn send_upgraded(
        &mut self,
        id: u64,
        rid: &RequestId,
        previous: &str,
        pause_ms: u64,
        image_bytes: u64,
    ) {
        let mut line = Vec::new();
        let mut w = begin_ok_response(rid, &mut line);
        w.str("version", env!("CARGO_PKG_VERSION"))
            .str("previous", previous)
            .u64("pid", u64::from(std::process::id()))
            .u64("pause_ms", pause_ms)
            .u64("image_bytes", image_bytes);
        w.finish();
        line.push(b'\n');
        self.push(id, &line);
    }

    /// A core request id whose reply goes to `rid` on connection `id`.
    pub fn expect_reply(&mut self, id: u64, rid: RequestId) -> u64 {
        let request = self.internal_request();
        self.replies.insert(request, (id, rid));
        request
    }

    /// Like [`Clients::expect_reply`], for a request answered only if it fails.
    pub fn expect_failure(&mut self, id: u64, rid: RequestId) -> u64 {
        let request = self.expect_reply(id, rid);
        self.quiet.insert(request);
        request
    }

    /// A core request id whose reply nobody waits for.
    pub fn internal_request(&mut self) -> u64 {
        let request = self.next_request;
        self.next_request += 1;
        request
    }

    /// Delivers the core's reply to the connection that asked, if it is still there.
    pub fn reply(&mut self, request: u64, result: &Result<Response, CoreError>, clock: Clock) {
        let quiet = !self.quiet.is_empty() && self.quiet.remove(&request);
        if !self.resizes.is_empty() {
            self.resized(request, result);
        }
        if let Some((id, rid)) = self.replies.remove(&request) {
            if quiet && result.is_ok() {
                return;
            }
            let mut line = Vec::new();
            encode::reply(&rid, result, clock, &mut line);
            self.push(id, &line);
        }
    }
}
