//! What each poll token stands for, encoded in the token itself.
//!
//! Fixed sources have small constant tokens, as in mio's own examples. A child's
//! descriptor carries its generation and which descriptor it is; a client carries its
//! connection number. Generation and connection numbers are never reused, so a sporadic
//! event for a source already closed decodes to something that no longer exists and is
//! ignored — it can never reach a newer source, and no table of tokens is kept in step.

use mio::Token;

use crate::core::Stream;

/// Where a readiness event comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The control socket's listener.
    Listener,
    /// SIGTERM, SIGINT, SIGHUP.
    ControlSignals,
    /// SIGCHLD.
    Sigchld,
    /// The link to the keeper: room to send, or the keeper gone.
    Keeper,
    /// The link to a keeper being started to replace one lost: its `Ready`, or its end.
    KeeperStart,
    /// The pipe to the log writer: room to send, or the writer gone.
    LogWriter,
    /// The upgrade's check of a program in flight: its exec-status pipe, its stdout, its
    /// pidfd (at most one check at a time).
    UpgradeCheck,
    /// Connection `id`.
    Client(u64),
    /// An output stream of generation `gen`; for a PTY also where its input goes.
    Output { gen: u64, stream: Stream },
    /// The stdin pipe of generation `gen`.
    Stdin { gen: u64 },
    /// The pidfd of generation `gen`.
    Pidfd { gen: u64 },
    /// The exec-status pipe of generation `gen` while it starts.
    SpawnStatus { gen: u64 },
    /// The `cgroup.events` file of generation `gen`'s cgroup: its population changed.
    CgroupEvents { gen: u64 },
    /// Generation `gen`'s session watch: a member it watches exited.
    TreeWatch { gen: u64 },
    /// The read end of generation `gen`'s readiness notification pipe.
    ReadyFd { gen: u64 },
    /// Generation `gen`'s readiness probe in flight: its connecting socket, or its
    /// command's pidfd.
    Probe { gen: u64 },
    /// The exec-status pipe of generation `gen`'s readiness probe command while it starts.
    ProbeStatus { gen: u64 },
    /// Generation `gen`'s liveness probe in flight (as [`Source::Probe`]).
    LiveProbe { gen: u64 },
    /// The exec-status pipe of generation `gen`'s liveness probe command.
    LiveProbeStatus { gen: u64 },
    /// Nothing we know.
    Unknown,
}

const LISTENER: usize = 0;
const CONTROL_SIGNALS: usize = 1;
const SIGCHLD: usize = 2;
const KEEPER: usize = 3;
const LOG_WRITER: usize = 4;
const UPGRADE_CHECK: usize = 5;
const KEEPER_START: usize = 6;

/// The top bit marks clients; below it, children use four bits for the descriptor kind.
const CLIENT_BIT: u64 = 1 << 63;
const KIND_BITS: u32 = 4;
const KIND_MASK: u64 = (1 << KIND_BITS) - 1;

const STDOUT: u64 = 0;
const STDERR: u64 = 1;
const PTY: u64 = 2;
const STDIN: u64 = 3;
const PIDFD: u64 = 4;
const SPAWN_STATUS: u64 = 5;
const CGROUP_EVENTS: u64 = 6;
const TREE_WATCH: u64 = 7;
const READY_FD: u64 = 8;
const PROBE: u64 = 9;
const PROBE_STATUS: u64 = 10;
const LIVE_PROBE: u64 = 11;
const LIVE_PROBE_STATUS: u64 = 12;

// Every number the core may allocate has a token, and no larger one.
const _: () = assert!(CLIENT_BIT >> KIND_BITS == crate::core::GEN_LIMIT);

// Tokens hold 64 bits of source identity.
const _: () = assert!(usize::BITS == 64, "genward needs a 64-bit usize");

impl Source {
    /// The token for this source, or `None` for a generation number too large to encode
    /// (2^59 and up: never reached by a counter that starts at 1).
    pub fn token(self) -> Option<Token> {
        let child = |gen: u64, kind: u64| {
            (gen < (CLIENT_BIT >> KIND_BITS)).then_some(Token(((gen << KIND_BITS) | kind) as usize))
        };
        match self {
            Source::Listener => Some(Token(LISTENER)),
            Source::ControlSignals => Some(Token(CONTROL_SIGNALS)),
            Source::Sigchld => Some(Token(SIGCHLD)),
            Source::Keeper => Some(Token(KEEPER)),
            Source::LogWriter => Some(Token(LOG_WRITER)),
            Source::UpgradeCheck => Some(Token(UPGRADE_CHECK)),
            Source::KeeperStart => Some(Token(KEEPER_START)),
            Source::Client(id) => (id < CLIENT_BIT).then_some(Token((CLIENT_BIT | id) as usize)),
            Source::Output { gen, stream } => child(
                gen,
                match stream {
                    Stream::Stdout => STDOUT,
                    Stream::Stderr => STDERR,
                    Stream::Pty => PTY,
                },
            ),
            Source::Stdin { gen } => child(gen, STDIN),
            Source::Pidfd { gen } => child(gen, PIDFD),
            Source::SpawnStatus { gen } => child(gen, SPAWN_STATUS),
            Source::CgroupEvents { gen } => child(gen, CGROUP_EVENTS),
            Source::TreeWatch { gen } => child(gen, TREE_WATCH),
            Source::ReadyFd { gen } => child(gen, READY_FD),
            Source::Probe { gen } => child(gen, PROBE),
            Source::ProbeStatus { gen } => child(gen, PROBE_STATUS),
            Source::LiveProbe { gen } => child(gen, LIVE_PROBE),
            Source::LiveProbeStatus { gen } => child(gen, LIVE_PROBE_STATUS),
            Source::Unknown => None,
        }
    }

    /// The source a token stands for.
    pub fn of(token: Token) -> Source {
        let t = token.0 as u64;
        if t & CLIENT_BIT != 0 {
            return Source::Client(t & !CLIENT_BIT);
        }
        let gen = t >> KIND_BITS;
        if gen == 0 {
            return match token.0 {
                LISTENER => Source::Listener,
                CONTROL_SIGNALS => Source::ControlSignals,
                SIGCHLD => Source::Sigchld,
                KEEPER => Source::Keeper,
                LOG_WRITER => Source::LogWriter,
                UPGRADE_CHECK => Source::UpgradeCheck,
                KEEPER_START => Source::KeeperStart,
                _ => Source::Unknown,
            };
        }
        match t & KIND_MASK {
            STDOUT => Source::Output {
                gen,
                stream: Stream::Stdout,
            },
            STDERR => Source::Output {
                gen,
                stream: Stream::Stderr,
            },
            PTY => Source::Output {
                gen,
                stream: Stream::Pty,
            },
            STDIN => Source::Stdin { gen },
            PIDFD => Source::Pidfd { gen },
            SPAWN_STATUS => Source::SpawnStatus { gen },
            CGROUP_EVENTS => Source::CgroupEvents { gen },
            TREE_WATCH => Source::TreeWatch { gen },
            READY_FD => Source::ReadyFd { gen },
            PROBE => Source::Probe { gen },
            PROBE_STATUS => Source::ProbeStatus { gen },
            LIVE_PROBE => Source::LiveProbe { gen },
            LIVE_PROBE_STATUS => Source::LiveProbeStatus { gen },
            _ => Source::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_round_trips_through_its_token() {
        let sources = [
            Source::Listener,
            Source::ControlSignals,
            Source::Sigchld,
            Source::Keeper,
            Source::LogWriter,
            Source::UpgradeCheck,
            Source::KeeperStart,
            Source::Client(0),
            Source::Client(1 << 40),
            Source::Output {
                gen: 1,
                stream: Stream::Stdout,
            },
            Source::Output {
                gen: 7,
                stream: Stream::Stderr,
            },
            Source::Output {
                gen: (1 << 59) - 1,
                stream: Stream::Pty,
            },
            Source::Stdin { gen: 1 },
            Source::Pidfd { gen: 123_456 },
            Source::SpawnStatus { gen: 99 },
            Source::CgroupEvents { gen: 100 },
            Source::TreeWatch { gen: 101 },
            Source::ReadyFd { gen: 102 },
            Source::Probe { gen: 103 },
            Source::ProbeStatus { gen: 104 },
            Source::LiveProbe { gen: 105 },
            Source::LiveProbeStatus { gen: 106 },
        ];
        for source in sources {
            let token = source.token().expect("encodable");
            assert_eq!(Source::of(token), source, "{token:?}");
        }
    }

    #[test]
    fn out_of_range_numbers_have_no_token() {
        assert_eq!(Source::Pidfd { gen: 1 << 59 }.token(), None);
        assert_eq!(Source::Client(1 << 63).token(), None);
        assert_eq!(Source::of(Token(7)), Source::Unknown);
    }
}
