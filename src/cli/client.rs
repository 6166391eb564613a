//! The client's connection to the daemon: a blocking Unix stream, requests with ids,
//! responses matched by id, and the events that arrive in between.
//!
//! Commands are short-lived and single-threaded, so the connection is blocking: a
//! request-and-answer command sends one line and reads until its response, keeping any
//! events read meanwhile in a backlog. `attach`, which must never stop reading output
//! while it writes input, switches the connection to [`Connection::set_nonblocking`]:
//! requests are then queued and written as the socket accepts them
//! ([`Connection::flush`]), and it polls [`Connection::fd`] for reading (and for writing
//! while [`Connection::queued`] is not zero) next to its other descriptors.
//!
//! Requests are typed [`Op`]s written by the protocol's own encoder, and everything read
//! goes through its [`FrameDecoder`], so the CLI holds no copy of the wire format.
//!
//! An answer the daemon gives at once (to `hello`, `get`, `subscribe`, `spawn`, `stop`,
//! ..., a page of `list`) is awaited at most the connection's [`Patience`]
//! (`GENWARD_TIMEOUT`, 30 s by default): a daemon that is stopped, or a socket whose owner
//! never answers, makes a command fail with [`ClientError::Silent`] instead of hanging.
//! Connecting is bounded by it too ([`ClientError::NotAccepted`]): a daemon that is
//! stopped with its backlog of connections full would otherwise hold connect(2) for ever.
//! What a command waits for by its meaning — a generation's end, the stream of `logs -f`
//! or `events`, an `upgrade` — is awaited with [`Connection::request_unbounded`] and
//! [`Connection::next_message`], without that bound.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::proto::duration::{format_compact, parse_duration};
use crate::proto::envelope::RequestId;
use crate::proto::event::EventError;
use crate::proto::framing::{FrameDecoder, FrameError, Message};
use crate::proto::json::{FieldError, Object, Value};
use crate::proto::request::{encode, Op};
use crate::store::state_dir::{self, StateDirError};
use crate::sys::unix_connect::connect_within;

/// Why a command could not talk to the daemon, or what the daemon refused.
#[derive(Debug)]
pub enum ClientError {
    /// Nothing listens at the socket path.
    NoDaemon(PathBuf),
    /// The path exists but is not a socket (a regular file, a directory, a FIFO).
    NotASocket(PathBuf),
    /// The socket path could not be worked out.
    NoSocket(StateDirError),
    /// Connecting failed for another reason.
    Connect(PathBuf, io::Error),
    /// The connection was not accepted within the connection's [`Patience`]: the
    /// listener's backlog is full (its daemon stopped, or overloaded). Nothing was sent.
    NotAccepted {
        /// The socket.
        socket: PathBuf,
        /// How long we waited.
        after: Duration,
    },
    /// The connection broke or closed before the answer came.
    Lost(String),
    /// The daemon sent something we cannot follow.
    Protocol(String),
    /// What answers at the socket is not a genward daemon: it sent a line that is not
    /// JSON, or JSON that is neither a response nor an event.
    Foreign {
        /// The socket.
        socket: PathBuf,
        /// What it sent, as the decoder saw it.
        why: String,
    },
    /// An answer the daemon gives at once did not come within the connection's
    /// [`Patience`]: the daemon is stopped, overloaded, or not a daemon at all.
    Silent {
        /// The socket.
        socket: PathBuf,
        /// How long we waited.
        after: Duration,
    },
    /// A request the protocol cannot carry (bytes that are not UTF-8 where it wants
    /// text, say); nothing was sent.
    Unsendable {
        /// The operation.
        op: &'static str,
        /// The field at fault.
        error: FieldError,
    },
    /// The daemon answered with an error.
    Remote {
        /// The stable error code, e.g. `no_such_session`.
        code: String,
        /// The daemon's explanation.
        message: String,
    },
}

impl ClientError {
    /// The error code, for a refusal by the daemon.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Remote { code, .. } => Some(code),
            _ => None,
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::NoDaemon(p) => write!(
                f,
                "no daemon at {}: start one with `genward daemon` (or point --socket / GENWARD_SOCKET at a running one)",
                p.display()
            ),
            ClientError::NotASocket(p) => write!(
                f,
                "{} is not a socket: point --socket / GENWARD_SOCKET at a daemon's socket",
                p.display()
            ),
            ClientError::NoSocket(StateDirError::NoDefault) => f.write_str(
                "no default daemon socket: XDG_RUNTIME_DIR is unset; pass --socket PATH or set GENWARD_SOCKET",
            ),
            ClientError::NoSocket(e) => write!(f, "{e}"),
            ClientError::Connect(p, e) if e.kind() == io::ErrorKind::PermissionDenied => write!(
                f,
                "cannot connect to {}: permission denied; the daemon belongs to another user (it may allow you with --allow-uid)",
                p.display()
            ),
            ClientError::Connect(p, e) => write!(f, "cannot connect to {}: {e}", p.display()),
            ClientError::NotAccepted { socket, after } => write!(
                f,
                "cannot connect to {}: not accepted in {} (is its daemon stopped, or overloaded?); giving up, nothing was sent ({TIMEOUT_ENV} sets how long to wait)",
                socket.display(),
                format_compact(*after)
            ),
            ClientError::Lost(why) => write!(f, "lost the daemon: {why}"),
            ClientError::Protocol(why) => write!(f, "unexpected data from the daemon: {why}"),
            ClientError::Foreign { socket, why } => write!(
                f,
                "{} does not speak genward's protocol: {why}",
                socket.display()
            ),
            ClientError::Silent { socket, after } => write!(
                f,
                "the daemon at {} has not answered in {} (stopped, or overloaded?); giving up \u{2014} a request already sent may still be carried out ({TIMEOUT_ENV} sets how long to wait)",
                socket.display(),
                format_compact(*after)
            ),
            ClientError::Unsendable { op, error } => {
                write!(f, "cannot send `{op}`: {error}")
            }
            ClientError::Remote { code, message } => {
                f.write_str(message)?;
                match code.as_str() {
                    "no_such_session" => f.write_str("; see `genward ls`"),
                    "stale_generation" => {
                        f.write_str("; nothing was done (see `genward ls` for the current one)")
                    }
                    "not_running" => f.write_str("; start it with `genward run` or `genward restart`"),
                    // A running session `run --reject` found; not the daemon shutting down,
                    // nor an upgrade under way, which no option of a command gets past.
                    "busy" if message.ends_with(" is busy") => {
                        f.write_str("; use --replace or --overlap to start it anyway")
                    }
                    _ => Ok(()),
                }
            }
        }
    }
}

impl std::error::Error for ClientError {}

/// The socket to use: `--socket`, else `GENWARD_SOCKET`, else `genward.sock` in the default
/// state directory (the daemon's own rule, so both agree without configuration).
pub fn socket_path(socket: Option<PathBuf>) -> Result<PathBuf, ClientError> {
    let from_env = std::env::var_os("GENWARD_SOCKET").filter(|v| !v.is_empty());
    if socket.is_some() || from_env.is_some() {
        return Ok(socket.unwrap_or_else(|| PathBuf::from(from_env.unwrap_or_default())));
    }
    state_dir::resolve(None, None)
        .map(|(_, socket)| socket)
        .map_err(ClientError::NoSocket)
}

/// The environment variable that sets [`Patience`].
pub const TIMEOUT_ENV: &str = "GENWARD_TIMEOUT";

/// How long an answer the daemon gives at once is awaited: `None` without limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Patience(pub Option<Duration>);

impl Patience {
    /// The default: 30 s, far beyond any answer a working daemon takes, short of a hang.
    pub const DEFAULT: Patience = Patience(Some(Duration::from_secs(30)));

    /// A value of [`TIMEOUT_ENV`]: a duration as the command line writes one; `0` waits
    /// without limit. A wait shorter than a millisecond is refused: it would give up
    /// before any daemon could answer.
    pub fn parse(value: &str) -> Result<Patience, String> {
        let d = parse_duration(value).map_err(|e| e.to_string())?;
        if d.is_zero() {
            return Ok(Patience(None));
        }
        if d < Duration::from_millis(1) {
            return Err("shorter than 1ms; give 0 to wait without limit".into());
        }
        Ok(Patience(Some(d)))
    }

    /// From [`TIMEOUT_ENV`]; the default when it is unset or empty. The error names the
    /// value and why it was refused.
    pub fn from_env() -> Result<Patience, (String, String)> {
        match std::env::var_os(TIMEOUT_ENV) {
            None => Ok(Patience::DEFAULT),
            Some(v) if v.is_empty() => Ok(Patience::DEFAULT),
            Some(v) => {
                let lossy = v.to_string_lossy().into_owned();
                let Some(text) = v.to_str() else {
                    return Err((lossy, "not valid UTF-8".into()));
                };
                Patience::parse(text).map_err(|why| (lossy, why))
            }
        }
    }
}

impl Default for Patience {
    fn default() -> Self {
        Patience::DEFAULT
    }
}

/// A response: its members, `ok` already checked.
pub type Response = Object;

/// One connection to the daemon.
#[derive(Debug)]
pub struct Connection {
    stream: UnixStream,
    /// The socket's path, to name it in errors.
    socket: PathBuf,
    /// How long an answer given at once is awaited.
    patience: Patience,
    decoder: FrameDecoder,
    next_id: u64,
    backlog: VecDeque<Message>,
    eof: bool,
    /// Non-blocking mode: requests not yet written.
    out: Option<Vec<u8>>,
    /// What [`Connection::read_available`] reads into, made on its first use.
    read_buf: Option<Box<[u8]>>,
}

impl Connection {
    /// Connects to the daemon at `path`, awaiting answers with the default [`Patience`].
    pub fn connect(path: &Path) -> Result<Connection, ClientError> {
        Connection::connect_with(path, Patience::DEFAULT)
    }

    /// Connects to the daemon at `path`, awaiting answers given at once at most
    /// `patience`.
    pub fn connect_with(path: &Path, patience: Patience) -> Result<Connection, ClientError> {
        let stream = connect_within(path, patience.0).map_err(|e| {
            use std::os::unix::fs::FileTypeExt;
            // Connecting to a file that is not a socket is refused as if nothing
            // listened: say what it is instead of suggesting to start a daemon there.
            let not_a_socket = e.kind() != io::ErrorKind::NotFound
                && std::fs::metadata(path).is_ok_and(|md| !md.file_type().is_socket());
            match e.kind() {
                _ if not_a_socket => ClientError::NotASocket(path.to_owned()),
                io::ErrorKind::TimedOut => ClientError::NotAccepted {
                    socket: path.to_owned(),
                    after: patience.0.unwrap_or_default(),
                },
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => {
                    ClientError::NoDaemon(path.to_owned())
                }
                _ => ClientError::Connect(path.to_owned(), e),
            }
        })?;
        // A request is written whole in blocking mode: a daemon that stopped reading
        // bounds that write too. (Ignored in non-blocking mode.)
        stream
            .set_write_timeout(patience.0)
            .map_err(|e| ClientError::Connect(path.to_owned(), e))?;
        Ok(Connection {
            stream,
            socket: path.to_owned(),
            patience,
            decoder: FrameDecoder::new(),
            next_id: 1,
            backlog: VecDeque::new(),
            eof: false,
            out: None,
            read_buf: None,
        })
    }

    /// Switches to non-blocking use: [`Connection::send`] queues, [`Connection::flush`]
    /// writes, [`Connection::read_available`] returns at once when nothing is there.
    /// [`Connection::request`] and [`Connection::next_message`] must not be used after.
    pub fn set_nonblocking(&mut self) -> Result<(), ClientError> {
        self.stream
            .set_nonblocking(true)
            .map_err(|e| ClientError::Lost(e.to_string()))?;
        self.out.get_or_insert_with(Vec::new);
        Ok(())
    }

    /// Bytes of requests waiting to be written (non-blocking mode).
    pub fn queued(&self) -> usize {
        self.out.as_ref().map_or(0, Vec::len)
    }

    /// Writes queued requests until done or the socket is full (non-blocking mode).
    pub fn flush(&mut self) -> Result<(), ClientError> {
        let Some(out) = self.out.as_mut() else {
            return Ok(());
        };
        while !out.is_empty() {
            match self.stream.write(out) {
                Ok(0) => return Err(ClientError::Lost("the daemon stopped reading".into())),
                Ok(n) => {
                    out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(ClientError::Lost(format!("sending: {e}"))),
            }
        }
        Ok(())
    }

    /// The socket, to poll for readability.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }

    /// Whether the daemon closed the connection and everything it sent was consumed.
    pub fn is_closed(&self) -> bool {
        self.eof && self.backlog.is_empty() && self.decoder.buffered() == 0
    }

    /// Sends request `op`; returns its id without waiting for the answer.
    pub fn send(&mut self, op: &Op) -> Result<u64, ClientError> {
        let id = self.next_id;
        self.send_as(&RequestId::U64(id), op)?;
        self.next_id += 1;
        Ok(id)
    }

    /// Sends request `op` under an id of the caller's (a quiet write's, which names what
    /// it was typed for: only a failure is answered, and that answer must say so).
    pub fn send_as(&mut self, rid: &RequestId, op: &Op) -> Result<(), ClientError> {
        let mut line = Vec::new();
        encode(rid, op, &mut line).map_err(|error| ClientError::Unsendable {
            op: op.name(),
            error,
        })?;
        let id = match rid {
            RequestId::U64(id) => *id,
            _ => u64::MAX,
        };
        let op = op.name();
        if let Some(out) = self.out.as_mut() {
            out.extend_from_slice(&line);
            self.flush()?;
            return Ok(());
        }
        if let Err(e) = self.stream.write_all(&line) {
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) {
                // The write timeout: the daemon has not read for that long.
                return Err(self.silent());
            }
            // A daemon that refuses a peer answers once and closes, possibly before our
            // request was written: its last words say why, so read them.
            let deadline = self.deadline();
            loop {
                match self.read_message(deadline) {
                    Ok(msg) => {
                        if let Some(Err(refusal)) = response_for(&msg, id) {
                            return Err(refusal);
                        }
                    }
                    Err(refusal @ ClientError::Remote { .. }) => return Err(refusal),
                    Err(_) => return Err(ClientError::Lost(format!("sending `{op}`: {e}"))),
                }
            }
        }
        Ok(())
    }

    /// Sends request `op` and waits for its response, which the daemon gives at once: at
    /// most the connection's [`Patience`], then [`ClientError::Silent`]. Events read
    /// meanwhile are kept for [`Connection::next_message`]. A refusal becomes
    /// [`ClientError::Remote`].
    pub fn request(&mut self, op: &Op) -> Result<Response, ClientError> {
        let id = self.send(op)?;
        let deadline = self.deadline();
        self.response(id, deadline)
    }

    /// [`Connection::request`] for a request whose answer takes as long as what it
    /// asks for (`wait`, `upgrade`): awaited without limit.
    pub fn request_unbounded(&mut self, op: &Op) -> Result<Response, ClientError> {
        let id = self.send(op)?;
        self.response(id, None)
    }

    fn response(&mut self, id: u64, deadline: Option<Instant>) -> Result<Response, ClientError> {
        loop {
            let msg = self.read_message(deadline)?;
            if let Some(result) = response_for(&msg, id) {
                return result;
            }
            self.backlog.push_back(msg);
        }
    }

    /// The next message, from the backlog first, blocking until one arrives, however
    /// long that takes (a stream of events, a generation's end).
    pub fn next_message(&mut self) -> Result<Message, ClientError> {
        match self.backlog.pop_front() {
            Some(m) => Ok(m),
            None => self.read_message(None),
        }
    }

    /// The next message of something the daemon sends at once (a replay, up to the
    /// answer that ends it): awaited at most the connection's [`Patience`].
    pub fn next_message_bounded(&mut self) -> Result<Message, ClientError> {
        match self.backlog.pop_front() {
            Some(m) => Ok(m),
            None => {
                let deadline = self.deadline();
                self.read_message(deadline)
            }
        }
    }

    /// The next message already received, without blocking.
    pub fn pop_message(&mut self) -> Result<Option<Message>, ClientError> {
        if let Some(m) = self.backlog.pop_front() {
            return Ok(Some(m));
        }
        self.decoded()
    }

    /// Reads what the socket has (call when poll says readable; blocks in blocking mode
    /// if nothing is there). Returns `false` once the daemon closed the connection.
    pub fn read_available(&mut self) -> Result<bool, ClientError> {
        // One buffer for the connection's life: zeroing 64 KiB per read was a notable
        // part of an attached terminal's cost per keystroke.
        let buf = self
            .read_buf
            .get_or_insert_with(|| vec![0; 64 * 1024].into_boxed_slice());
        loop {
            match self.stream.read(buf) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.decoder.feed(&buf[..n]);
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
                Err(e) => return Err(ClientError::Lost(e.to_string())),
            }
        }
    }

    fn decoded(&mut self) -> Result<Option<Message>, ClientError> {
        loop {
            match self.decoder.next_message() {
                None => return Ok(None),
                Some(Ok(m)) => {
                    if let Some(Err(e)) = response_for(&m, u64::MAX) {
                        // An error answer without an id: the daemon refused the connection
                        // or a line it could not read; either way it concerns us.
                        return Err(e);
                    }
                    return Ok(Some(m));
                }
                // An event this build does not know may come from a newer daemon: skipped,
                // the stream is still in step.
                Some(Err(e @ FrameError::BadEvent(EventError::Unknown(_)))) => {
                    log::debug!("skipped a line from the daemon: {e}");
                }
                // A genward daemon never sends a line that is not JSON, nor JSON that is
                // neither a response nor an event: what answers is something else, and
                // skipping its lines would wait for an answer that never comes.
                Some(Err(e @ (FrameError::BadJson(_) | FrameError::NotAMessage(_)))) => {
                    return Err(ClientError::Foreign {
                        socket: self.socket.clone(),
                        why: e.to_string(),
                    });
                }
                Some(Err(e)) => return Err(ClientError::Protocol(e.to_string())),
            }
        }
    }

    /// When an answer given at once, awaited from now, is overdue.
    fn deadline(&self) -> Option<Instant> {
        self.patience.0.map(|p| Instant::now() + p)
    }

    fn silent(&self) -> ClientError {
        ClientError::Silent {
            socket: self.socket.clone(),
            after: self.patience.0.unwrap_or_default(),
        }
    }

    /// The next message read, blocking; with a `deadline`, at most until then.
    fn read_message(&mut self, deadline: Option<Instant>) -> Result<Message, ClientError> {
        loop {
            if let Some(m) = self.decoded()? {
                return Ok(m);
            }
            if self.eof {
                return Err(ClientError::Lost("the daemon closed the connection".into()));
            }
            if let Some(deadline) = deadline {
                self.await_readable(deadline)?;
            }
            if !self.read_available()? {
                return Err(ClientError::Lost("the daemon closed the connection".into()));
            }
        }
    }

    /// Returns once the socket is readable (or closed), or [`ClientError::Silent`] once
    /// `deadline` has passed without.
    fn await_readable(&self, deadline: Instant) -> Result<(), ClientError> {
        use std::os::fd::AsRawFd;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // Past the deadline, one more look without waiting: after this process was
            // itself stopped a while, the answer may well be there.
            let ms = i32::try_from(left.as_nanos().div_ceil(1_000_000)).unwrap_or(i32::MAX);
            let mut pfd = libc::pollfd {
                fd: self.stream.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, borrowed for the call.
            let n = unsafe { libc::poll(&mut pfd, 1, ms) };
            if n > 0 {
                return Ok(());
            }
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(ClientError::Lost(format!("waiting for the daemon: {e}")));
                }
            } else if left.is_zero() {
                return Err(self.silent());
            }
        }
    }
}

/// `Some(result)` when `msg` is the response to request `id` (or an id-less error, which
/// answers whatever was asked).
pub fn response_for(msg: &Message, id: u64) -> Option<Result<Response, ClientError>> {
    let Message::Response(obj) = msg else {
        return None;
    };
    let ok = obj.get("ok")?;
    match obj.get("id") {
        Some(v) if v.as_u64() == Some(id) => {}
        Some(Value::Null) | None if *ok == Value::Bool(false) => {}
        _ => return None,
    }
    if *ok == Value::Bool(true) {
        return Some(Ok(obj.clone()));
    }
    let error = obj.get("error").and_then(Value::as_object);
    let field = |k: &str| {
        error
            .and_then(|e| e.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    Some(Err(ClientError::Remote {
        code: field("code"),
        message: field("message"),
    }))
}

/// A JSON object member as `u64`.
pub fn u64_of(obj: &Object, key: &str) -> Option<u64> {
    obj.get(key).and_then(Value::as_u64)
}

/// A JSON object member as text.
pub fn str_of<'a>(obj: &'a Object, key: &str) -> Option<&'a str> {
    obj.get(key).and_then(Value::as_str)
}

/// The objects of array member `key` (none if it is absent or not an array).
pub fn objects_of<'a>(obj: &'a Object, key: &str) -> Vec<&'a Object> {
    obj.get(key)
        .and_then(Value::as_array)
        .unwrap_or_default()
        .iter()
        .filter_map(Value::as_object)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(json: &str) -> Message {
        let mut d = FrameDecoder::new();
        d.feed(json.as_bytes());
        d.feed(b"\n");
        d.next_message().unwrap().unwrap()
    }

    #[test]
    fn responses_match_by_id_and_errors_carry_code_and_message() {
        assert!(response_for(&msg(r#"{"id":2,"ok":true}"#), 1).is_none());
        let event = r#"{"event":"spawned","session":"a","gen":1,"pid":9,"id":1,"ok":true}"#;
        assert!(response_for(&msg(event), 1).is_none());
        let ok = response_for(&msg(r#"{"id":1,"ok":true,"gen":4}"#), 1).unwrap();
        assert_eq!(u64_of(&ok.unwrap(), "gen"), Some(4));
        let e = response_for(
            &msg(r#"{"id":1,"ok":false,"error":{"code":"no_such_session","message":"no session named `x`"}}"#),
            1,
        )
        .unwrap()
        .unwrap_err();
        assert_eq!(e.code(), Some("no_such_session"));
        assert_eq!(e.to_string(), "no session named `x`; see `genward ls`");
    }

    #[test]
    fn only_a_busy_session_gets_the_hint_of_run_options() {
        let busy = |message: &str| ClientError::Remote {
            code: "busy".into(),
            message: message.into(),
        };
        assert_eq!(
            busy(r#"session "web" is busy"#).to_string(),
            r#"session "web" is busy; use --replace or --overlap to start it anyway"#
        );
        for other in [
            "an upgrade is already under way",
            "the daemon is shutting down",
        ] {
            assert_eq!(busy(other).to_string(), other);
        }
    }

    #[test]
    fn an_id_less_error_answers_any_request() {
        let e = response_for(
            &msg(r#"{"id":null,"ok":false,"error":{"code":"limit","message":"too many connections (limit 1)"}}"#),
            7,
        )
        .unwrap()
        .unwrap_err();
        assert_eq!(e.code(), Some("limit"));
    }

    #[test]
    fn no_daemon_says_what_to_do() {
        let dir = std::env::temp_dir().join(format!("gw-client-{}", std::process::id()));
        let e = Connection::connect(&dir.join("absent.sock")).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("no daemon at "), "{text}");
        assert!(text.contains("start one with `genward daemon`"), "{text}");
    }
}
