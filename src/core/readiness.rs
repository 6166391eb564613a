//! When a generation is ready: the spec's `ready` check, and each generation's readiness
//! as a small state machine of its own.
//!
//! The core owns the state, the timeout and the probe schedule; the driver only detects
//! signals (a newline on the notification descriptor, a matching output line) and runs the
//! probes the core asks for (a connection, a command), feeding each result back as an
//! input naming the generation (and, for a probe, its number, so an answer to a probe the
//! core gave up on is told apart from the one in flight).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use super::action::{Action, Event};
use super::error::Error;
use super::time::Time;

/// Largest `output` text a readiness check may look for: the matcher keeps at most this
/// many bytes of a line between reads.
pub const MAX_READY_TEXT: usize = 4096;

/// Highest descriptor number the notification pipe may be given at.
pub const MAX_READY_FD: u32 = 1023;

/// The refusal of notification descriptor `n`: also for a number sent that no spec can
/// hold, so the message shows the number sent.
pub fn bad_fd(n: u64) -> Error {
    Error::bad(format!(
        "ready.fd: {n} must be 3..={MAX_READY_FD} (0, 1 and 2 are the standard streams)"
    ))
}

/// Shortest probe interval (a probe loop faster than this is a busy loop).
pub const MIN_READY_INTERVAL: Duration = Duration::from_millis(10);

/// Why a readiness still awaited fails when its leader ends first (`NEVER_STARTED` when it
/// never began). Subscribers see the `ready_failed`; a `wait` for readiness is answered
/// with the terminal event instead, which says how it ended (see [`ended_first`]).
const EXITED_FIRST: &str = "exited before it was ready";
const NEVER_STARTED: &str = "never started";

/// Whether a readiness failed for `reason` only because its leader ended first. The
/// reason is what a restored or upgraded daemon keeps of a failure, so it is what tells.
pub fn ended_first(reason: &str) -> bool {
    reason == EXITED_FIRST || reason == NEVER_STARTED
}

/// How a generation of a spec says it is ready, and how long it has to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadyCheck {
    /// What marks it ready.
    pub how: ReadyHow,
    /// How long after its spawn it may take before readiness is declared failed.
    pub timeout: Duration,
    /// How often a probe (`tcp`, `unix`, `command`) is run; each run is given up if it
    /// outlives it.
    pub interval: Duration,
}

/// What marks a generation ready.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadyHow {
    /// The child gets the write end of a pipe at this descriptor (s6's notification-fd);
    /// a newline read from it marks it ready, end of file before one fails readiness.
    Fd(u32),
    /// A line of its output (any stream it has) contains this text.
    Output(Vec<u8>),
    /// A TCP connection to `HOST:PORT` is accepted.
    Tcp(String),
    /// A connection to the Unix socket at this path is accepted.
    Unix(Vec<u8>),
    /// This command, run as the session's user with its environment and directory, exits 0.
    Command(Vec<Vec<u8>>),
}

impl ReadyHow {
    /// The wire name of the kind.
    pub const fn kind(&self) -> &'static str {
        match self {
            ReadyHow::Fd(_) => "fd",
            ReadyHow::Output(_) => "output",
            ReadyHow::Tcp(_) => "tcp",
            ReadyHow::Unix(_) => "unix",
            ReadyHow::Command(_) => "command",
        }
    }

    /// Whether the core runs it as a probe on a schedule (the others are signals the
    /// driver watches for).
    pub const fn is_probe(&self) -> bool {
        matches!(
            self,
            ReadyHow::Tcp(_) | ReadyHow::Unix(_) | ReadyHow::Command(_)
        )
    }
}

impl ReadyCheck {
    /// A check of `how` with the default timeout (60 s) and interval (1 s).
    pub fn new(how: ReadyHow) -> ReadyCheck {
        ReadyCheck {
            how,
            timeout: Duration::from_secs(60),
            interval: Duration::from_secs(1),
        }
    }

    /// Checks every field, naming it.
    pub fn validate(&self) -> Result<(), Error> {
        match &self.how {
            ReadyHow::Fd(n) if !(3..=MAX_READY_FD).contains(n) => return Err(bad_fd((*n).into())),
            ReadyHow::Output(t) if t.is_empty() || t.len() > MAX_READY_TEXT => {
                return Err(Error::bad(format!(
                    "ready.output: the text must be 1..={MAX_READY_TEXT} bytes"
                )))
            }
            ReadyHow::Output(t) if t.contains(&b'\n') => return Err(Error::bad(
                "ready.output: the text must not contain a newline (it is matched within a line)",
            )),
            ReadyHow::Tcp(addr) => {
                check_host_port(addr).map_err(|e| Error::bad(format!("ready.tcp: {e}")))?;
            }
            ReadyHow::Unix(p) if p.is_empty() || p.len() > 107 || p.contains(&0) => {
                return Err(Error::bad(
                    "ready.unix: the path must be 1..=107 bytes without NUL",
                ))
            }
            ReadyHow::Command(argv) => {
                if argv.first().is_none_or(|a| a.is_empty()) {
                    return Err(Error::bad("ready.command: argv[0] is missing or empty"));
                }
                if let Some(i) = argv.iter().position(|a| a.contains(&0)) {
                    return Err(Error::bad(format!(
                        "ready.command[{i}] contains a NUL byte"
                    )));
                }
            }
            ReadyHow::Fd(_) | ReadyHow::Output(_) | ReadyHow::Unix(_) => {}
        }
        if self.timeout.is_zero() {
            return Err(Error::bad("ready.timeout: must be more than 0"));
        }
        if self.interval < MIN_READY_INTERVAL {
            return Err(Error::bad(format!(
                "ready.interval: must be at least {} ms",
                MIN_READY_INTERVAL.as_millis()
            )));
        }
        Ok(())
    }
}

/// Reads `HOST:PORT` (an IPv6 host in brackets), saying what is wrong. The host is an IP
/// address or `localhost`: a name would need a DNS lookup, which blocks.
pub fn check_host_port(addr: &str) -> Result<std::net::SocketAddr, String> {
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| format!("`{addr}` is not HOST:PORT"))?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() || host.len() > 253 {
        return Err(format!("`{addr}`: the host must be 1..=253 characters"));
    }
    let port = match port.parse::<u16>() {
        Ok(p) if p > 0 => p,
        _ => return Err(format!("`{addr}`: the port must be 1..=65535")),
    };
    let ip: std::net::IpAddr = match host {
        "localhost" => std::net::Ipv4Addr::LOCALHOST.into(),
        h => h.parse().map_err(|_| {
            format!("`{addr}`: the host must be an IP address or localhost (a name would need a DNS lookup)")
        })?,
    };
    Ok(std::net::SocketAddr::new(ip, port))
}

/// A generation's readiness, as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadyState {
    /// Not ready yet (not spawned, or its check has not passed).
    Starting,
    /// Ready: its check passed, or it has none and was spawned.
    Ready,
    /// Its check failed; the process is left running (a failed readiness is reported, not
    /// acted on: the restart policy or a liveness check acts on health).
    Failed(Arc<str>),
}

impl ReadyState {
    /// The wire spelling.
    pub const fn as_str(&self) -> &'static str {
        match self {
            ReadyState::Starting => "starting",
            ReadyState::Ready => "ready",
            ReadyState::Failed(_) => "ready_failed",
        }
    }
}

/// What the driver saw about a generation's readiness.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadySignal {
    /// The notification descriptor gave a newline, or an output line matched.
    Ready,
    /// The check can never pass (e.g. the notification descriptor closed without a
    /// newline); the reason says why.
    Failed(Arc<str>),
    /// Probe number `probe` finished: `ok` when the connection was accepted or the
    /// command exited 0.
    Probed { probe: u64, ok: bool },
}

/// One generation's readiness, with its deadlines (carried in a core image as is).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Not spawned yet.
    Unstarted,
    /// Spawned and checked; `deadline` is the timeout.
    Waiting {
        /// When readiness fails.
        deadline: Time,
        /// When the next probe is due (probes only; `None` while one is in flight).
        next_probe: Option<Time>,
        /// The probe in flight: its number and when it is given up.
        probe: Option<(u64, Time)>,
        /// Probes asked so far: the next one's number.
        probes: u64,
    },
    /// Ready.
    Ready,
    /// Its check failed, for this reason.
    Failed(Arc<str>),
}

impl Readiness {
    /// The state right after a spawn of a spec with `check`.
    pub fn at_spawn(check: Option<&ReadyCheck>, now: Time) -> Readiness {
        match check {
            None => Readiness::Ready,
            Some(c) => Readiness::Waiting {
                deadline: now.saturating_add(c.timeout),
                next_probe: c.how.is_probe().then_some(now),
                probe: None,
                probes: 0,
            },
        }
    }

    /// As listed.
    pub fn state(&self) -> ReadyState {
        match self {
            Readiness::Unstarted | Readiness::Waiting { .. } => ReadyState::Starting,
            Readiness::Ready => ReadyState::Ready,
            Readiness::Failed(why) => ReadyState::Failed(why.clone()),
        }
    }

    /// The earliest instant it wants a timeout call.
    pub fn deadline(&self) -> Option<Time> {
        match *self {
            Readiness::Waiting {
                deadline,
                next_probe,
                probe,
                ..
            } => [Some(deadline), next_probe, probe.map(|(_, t)| t)]
                .into_iter()
                .flatten()
                .min(),
            _ => None,
        }
    }
}

/// Who the readiness belongs to, for the events and actions it produces.
pub(crate) struct Owner {
    pub session: Arc<str>,
    pub gen: u64,
    pub spec: Arc<super::spec::Spec>,
}

impl Owner {
    fn check(&self) -> Option<&ReadyCheck> {
        self.spec.ready.as_ref()
    }

    fn settle(&self, r: &mut Readiness, to: Readiness, out: &mut VecDeque<Action>) {
        let event = match &to {
            Readiness::Ready => Event::Ready {
                session: self.session.clone(),
                gen: self.gen,
            },
            Readiness::Failed(reason) => Event::ReadyFailed {
                session: self.session.clone(),
                gen: self.gen,
                reason: reason.clone(),
            },
            _ => return,
        };
        *r = to;
        out.push_back(Action::ReadySettled { gen: self.gen });
        out.push_back(Action::Emit(event));
    }

    /// A signal from the driver. Ignored unless waiting, and a probe result unless it
    /// answers the probe in flight.
    pub fn on_signal(
        &self,
        r: &mut Readiness,
        now: Time,
        signal: ReadySignal,
        out: &mut VecDeque<Action>,
    ) {
        let Readiness::Waiting {
            probe: in_flight,
            next_probe,
            ..
        } = r
        else {
            return;
        };
        match signal {
            ReadySignal::Ready => self.settle(r, Readiness::Ready, out),
            ReadySignal::Failed(why) => self.settle(r, Readiness::Failed(why), out),
            ReadySignal::Probed { probe, ok } => {
                let Some((n, until)) = *in_flight else { return };
                if n != probe {
                    return;
                }
                if ok {
                    self.settle(r, Readiness::Ready, out);
                    return;
                }
                // The next run is one interval after this one began (its give-up time).
                *in_flight = None;
                *next_probe = Some(until.max(now));
            }
        }
    }

    /// Its deadlines that are due: the timeout fails it; a probe outliving its interval
    /// is given up (and counts as failed); a due probe is asked for.
    pub fn on_timeout(&self, r: &mut Readiness, now: Time, out: &mut VecDeque<Action>) {
        let Readiness::Waiting {
            deadline,
            next_probe,
            probe,
            probes,
        } = r
        else {
            return;
        };
        if *deadline <= now {
            let after = self.check().map_or(Duration::ZERO, |c| c.timeout);
            let why = format!("timed out after {}", human(after));
            self.settle(r, Readiness::Failed(why.into()), out);
            return;
        }
        let interval = self.check().map_or(Duration::from_secs(1), |c| c.interval);
        if let Some((n, until)) = *probe {
            if until <= now {
                out.push_back(Action::CancelProbe {
                    gen: self.gen,
                    probe: n,
                    live: false,
                });
                *probe = None;
                *next_probe = Some(now);
            }
        }
        if probe.is_none() && next_probe.is_some_and(|t| t <= now) {
            let n = *probes;
            *probes = probes.saturating_add(1);
            *next_probe = None;
            *probe = Some((n, now.saturating_add(interval)));
            out.push_back(Action::Probe {
                gen: self.gen,
                probe: n,
                live: false,
            });
        }
    }

    /// The leader exited: a readiness still awaited fails (the process can no longer
    /// become ready).
    pub fn on_exit(&self, r: &mut Readiness, out: &mut VecDeque<Action>) {
        match r {
            Readiness::Waiting { .. } => {
                let why = Readiness::Failed(EXITED_FIRST.into());
                self.settle(r, why, out);
            }
            Readiness::Unstarted => *r = Readiness::Failed(NEVER_STARTED.into()),
            Readiness::Ready | Readiness::Failed(_) => {}
        }
    }
}

/// A duration as people write it: `60s`, `1.5s`, `250ms`.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else if ms >= 1000 {
        let secs = format!("{}.{:03}", ms / 1000, ms % 1000);
        format!("{}s", secs.trim_end_matches('0'))
    } else {
        format!("{ms}ms")
    }
}
