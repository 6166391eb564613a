//! The connections across an upgrade: exported into the image with everything owed to
//! them, and taken back by the next program on the same sockets.

use std::collections::HashSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use mio::net::{UnixListener, UnixStream};
use mio::{Interest, Registry};

use super::super::client::Client;
use super::super::frame::Frame;
use super::super::listener::PeerPolicy;
use super::super::logs::Logs;
use super::super::subscriptions::{Cursor, Subscriptions};
use super::super::token::Source;
use super::super::upgrade::state::{ClientsImage, CursorImage, WaitImage};
use super::{ClientLimits, Clients, Hello};
use crate::proto::request::{Lossless, Replay};

/// `Replay` as the image spells it.
pub fn replay_name(replay: Replay) -> String {
    match replay {
        Replay::Now => "now".into(),
        Replay::Start => "start".into(),
        Replay::Tail(n) => format!("tail:{n}"),
        Replay::Pos(n) => format!("pos:{n}"),
        Replay::Gen(n) => format!("gen:{n}"),
    }
}

/// The `Replay` an image names; anything else is read as `now` (it only says where a
/// subscription to every session starts on sessions that existed when it was made).
pub fn replay_of(name: &str) -> Replay {
    let num = |s: &str| s.parse::<u64>().ok();
    match name.split_once(':') {
        None if name == "start" => Replay::Start,
        Some(("tail", n)) => num(n).map_or(Replay::Now, Replay::Tail),
        Some(("pos", n)) => num(n).map_or(Replay::Now, Replay::Pos),
        Some(("gen", n)) => num(n).map_or(Replay::Now, Replay::Gen),
        _ => Replay::Now,
    }
}

/// A duration in whole milliseconds, as the image keeps a `demote_after`.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The lossless terms an image names (a bound of 0 would demote at once: at least 1 ms).
fn lossless_of(ms: u64) -> Lossless {
    Lossless {
        demote_after: Duration::from_millis(ms.max(1)),
    }
}

impl ClientsImage {
    /// The sessions a lossless subscription in the image follows, and whether one follows
    /// every session (`all`): their logs are to be opened as large as those subscribers
    /// had them (at least [`LOSSLESS_LOG_BYTES`](super::LOSSLESS_LOG_BYTES)), or what they have not read yet would be cut.
    pub fn paced_sessions(&self) -> (bool, HashSet<&str>) {
        let all = self.clients.iter().any(|c| c.all_lossless_ms.is_some());
        let sessions = self
            .clients
            .iter()
            .flat_map(|c| &c.cursors)
            .filter(|cur| cur.lossless_ms.is_some())
            .map(|cur| cur.session.as_str())
            .collect();
        (all, sessions)
    }
}

impl Clients {
    /// Every connection and what is owed to it, for an upgrade image.
    pub fn export(&self, logs: &Logs) -> ClientsImage {
        let index = logs.frame_index();
        let find = |f: &Frame| index.get(&f.identity()).cloned();
        let mut clients: Vec<_> = self
            .table
            .iter()
            .map(|(&id, c)| {
                let mut image = c.export(id, find);
                let (cursors, all, all_lossless) = self.subs.export_client(id);
                image.cursors = cursors
                    .into_iter()
                    .map(|(session, cur, behind, lossless)| CursorImage {
                        session: session.to_string(),
                        seq: cur.seq,
                        pos: cur.pos,
                        behind,
                        lossless_ms: lossless.map(|l| millis(l.demote_after)),
                    })
                    .collect();
                image.all = all.map(replay_name);
                image.all_lossless_ms = all_lossless.map(|l| millis(l.demote_after));
                image
            })
            .collect();
        clients.sort_by_key(|c| c.id);
        // A readiness wait is carried as a wait for the generation's end (the image has no
        // kind): across an upgrade it is answered when the generation ends.
        let mut waits: Vec<WaitImage> = self
            .waits
            .iter()
            .chain(self.ready_waits.iter())
            .flat_map(|(&gen, list)| {
                list.iter().map(move |(client, rid)| WaitImage {
                    gen,
                    client: *client,
                    rid: rid.clone(),
                })
            })
            .collect();
        waits.sort_by_key(|w| (w.gen, w.client));
        let mut replies: Vec<_> = self
            .replies
            .iter()
            .map(|(&req, (client, rid))| (req, *client, rid.clone()))
            .collect();
        replies.sort_by_key(|r| r.0);
        ClientsImage {
            listener: self.listener.socket().as_raw_fd(),
            next_id: self.next_id,
            next_request: self.next_request,
            clients,
            waits,
            replies,
        }
    }

    /// Takes back the connections of an image whose descriptors were checked (open, each
    /// named once); the listener and every socket are registered again. Cannot fail: a
    /// socket that cannot be registered is logged and closed like a broken connection.
    pub fn resume(
        image: ClientsImage,
        registry: &Registry,
        policy: PeerPolicy,
        limits: ClientLimits,
        hello: Hello,
        logs: &Logs,
    ) -> Clients {
        // SAFETY: the image's descriptors were checked open and named once, and the
        // listener's number is taken by this owner alone.
        let mut listener = UnixListener::from_std(unsafe {
            std::os::unix::net::UnixListener::from(OwnedFd::from_raw_fd(image.listener))
        });
        let _ = crate::sys::reexec::set_close_on_exec(std::os::fd::AsFd::as_fd(&listener), true);
        if let Some(token) = Source::Listener.token() {
            if let Err(e) = registry.register(&mut listener, token, Interest::READABLE) {
                log::error!("register the socket again: {e}");
            }
        }
        let mut clients = Clients::new(listener, policy, limits, hello);
        clients.next_id = image.next_id;
        clients.next_request = image.next_request;
        let mut subs = Subscriptions::default();
        for c in image.clients {
            let id = c.id;
            // SAFETY: as for the listener: checked, and owned here alone.
            let fd = unsafe { OwnedFd::from_raw_fd(c.fd) };
            let _ = crate::sys::reexec::set_close_on_exec(std::os::fd::AsFd::as_fd(&fd), true);
            let mut stream = UnixStream::from_std(std::os::unix::net::UnixStream::from(fd));
            let registered = Source::Client(id).token().is_some_and(|token| {
                registry
                    .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
                    .map_err(|e| log::error!("register client {id} again: {e}"))
                    .is_ok()
            });
            if !registered {
                continue;
            }
            let cursors = c
                .cursors
                .iter()
                .map(|cur| {
                    let cursor = Cursor {
                        seq: cur.seq,
                        pos: cur.pos,
                    };
                    let session = Arc::<str>::from(cur.session.as_str());
                    let lossless = cur.lossless_ms.map(lossless_of);
                    (session, cursor, cur.behind, lossless)
                })
                .collect();
            let all_lossless = c.all_lossless_ms.map(lossless_of);
            subs.import_client(id, cursors, c.all.as_deref().map(replay_of), all_lossless);
            let held = clients.held.clone();
            let (max_line, outbox_bytes) = (limits.max_line, limits.outbox_bytes);
            let client = Client::resumed(stream, c, max_line, outbox_bytes, held, logs);
            clients.table.insert(id, client);
            clients.dirty.push(id);
        }
        for c in clients.table.values_mut() {
            c.dirty = true;
        }
        clients.subs = subs;
        for w in image.waits {
            if clients.table.contains_key(&w.client) {
                clients
                    .waits
                    .entry(w.gen)
                    .or_default()
                    .push((w.client, w.rid));
            }
        }
        for (request, client, rid) in image.replies {
            if clients.table.contains_key(&client) {
                clients.replies.insert(request, (client, rid));
            }
        }
        clients
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_names_round_trip() {
        for r in [
            Replay::Now,
            Replay::Start,
            Replay::Tail(5),
            Replay::Pos(7),
            Replay::Gen(9),
        ] {
            assert_eq!(replay_of(&replay_name(r)), r);
        }
        assert_eq!(replay_of("tail:x"), Replay::Now);
    }
}
