//! The driver's section of an upgrade image, both ways: [`DriverImage`] ↔ bytes, in
//! the fixed field order docs/upgrade.md gives, every count checked against the bytes left.

use std::os::fd::RawFd;
use std::path::PathBuf;

use super::*;
use crate::driver::config::{DEFAULT_MAX_RUNNING, DEFAULT_MAX_SESSIONS};
use crate::proto::envelope::RequestId;
use crate::store::image::{ImageError, Reader, Writer};

impl DriverImage {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        let c = &self.config;
        w.bytes(c.state_dir.as_os_str().as_encoded_bytes());
        w.bytes(c.socket.as_os_str().as_encoded_bytes());
        w.count(c.allow_uids.len());
        for uid in &c.allow_uids {
            w.u32(*uid);
        }
        w.u8(c.reaper).bool(c.subreaper).u64(c.max_clients);
        w.u64(c.outbox_bytes).u64(c.max_line).u8(c.containment);
        w.bytes(c.program.as_os_str().as_encoded_bytes());
        w.opt_u64(c.keeper_hold_ms);
        w.u64(self.clock_start_ns)
            .u64(self.epoch_unix_ms)
            .i32(self.lease);
        match &self.cgroup_root {
            None => w.u8(0),
            Some(name) => w.u8(1).str(name),
        };
        w.opt_fd(self.keeper);
        w.count(self.children.len());
        for ch in &self.children {
            write_child(&mut w, ch);
        }
        write_clients(&mut w, &self.clients);
        w.count(self.unverified.len());
        for k in &self.unverified {
            w.u64(k.gen).str(&k.session).u32(k.pid).str(&k.token);
        }
        w.count(self.exec_only.len());
        for fd in &self.exec_only {
            w.i32(*fd);
        }
        match &self.requester {
            None => {
                w.u8(0);
            }
            Some(r) => {
                w.u8(1).u64(r.client);
                write_rid(&mut w, &r.rid);
                w.str(&r.previous_version).u64(r.paused_at_ns);
            }
        }
        w.u64(c.max_sessions).u64(c.max_running);
        w.bool(c.output_to_stdout);
        match &c.config {
            None => w.u8(0),
            Some(p) => w.u8(1).bytes(p.as_os_str().as_encoded_bytes()),
        };
        w.count(self.probe_identities.len());
        for (gen, found) in &self.probe_identities {
            w.u64(*gen).bytes(found);
        }
        w.count(self.unsaved.len());
        for name in &self.unsaved {
            w.str(name);
        }
        w.finish()
    }

    pub fn decode(bytes: &[u8]) -> Result<DriverImage, ImageError> {
        let mut r = Reader::new(bytes);
        let state_dir = path(&mut r)?;
        let socket = path(&mut r)?;
        let n = r.count(4)?;
        let mut allow_uids = Vec::with_capacity(n);
        for _ in 0..n {
            allow_uids.push(r.u32()?);
        }
        let mut config = ConfigImage {
            state_dir,
            socket,
            allow_uids,
            reaper: small(r.u8()?, 1, "reaper")?,
            subreaper: r.bool()?,
            max_clients: r.u64()?,
            outbox_bytes: r.u64()?,
            max_line: r.u64()?,
            // Read at the end (see below).
            max_sessions: 0,
            max_running: 0,
            containment: small(r.u8()?, 2, "containment")?,
            program: path(&mut r)?,
            keeper_hold_ms: r.opt_u64()?,
            output_to_stdout: false,
            // Read at the end (see below).
            config: None,
        };
        let clock_start_ns = r.u64()?;
        let epoch_unix_ms = r.u64()?;
        let lease = fd(&mut r)?;
        let cgroup_root = match r.u8()? {
            0 => None,
            1 => Some(r.str()?.to_owned()),
            t => return Err(ImageError(format!("{t} is not a cgroup tag"))),
        };
        let keeper = r.opt_fd()?;
        let n = r.count(8)?;
        let mut children = Vec::with_capacity(n);
        for _ in 0..n {
            children.push(read_child(&mut r)?);
        }
        let clients = read_clients(&mut r)?;
        let n = r.count(8)?;
        let mut unverified = Vec::with_capacity(n);
        for _ in 0..n {
            unverified.push(KeptImage {
                gen: r.u64()?,
                session: r.str()?.to_owned(),
                pid: r.u32()?,
                token: r.str()?.to_owned(),
            });
        }
        let n = r.count(4)?;
        let mut exec_only = Vec::with_capacity(n);
        for _ in 0..n {
            exec_only.push(fd(&mut r)?);
        }
        let requester = match r.u8()? {
            0 => None,
            1 => Some(RequesterImage {
                client: r.u64()?,
                rid: read_rid(&mut r)?,
                previous_version: r.str()?.to_owned(),
                paused_at_ns: r.u64()?,
            }),
            t => return Err(ImageError(format!("{t} is not a requester tag"))),
        };
        // Last, so an image of a build before them still reads: then the defaults.
        if r.is_empty() {
            config.max_sessions = DEFAULT_MAX_SESSIONS as u64;
            config.max_running = DEFAULT_MAX_RUNNING as u64;
        } else {
            config.max_sessions = r.u64()?;
            config.max_running = r.u64()?;
        }
        // Later still: absent from an image of a build before `--output-to-stdout`.
        if !r.is_empty() {
            config.output_to_stdout = r.bool()?;
        }
        // Later still: absent from an image of a build before configurations.
        if !r.is_empty() {
            config.config = match r.u8()? {
                0 => None,
                1 => Some(path(&mut r)?),
                t => return Err(ImageError(format!("{t} is not a config tag"))),
            };
        }
        // Later still: absent from an image of a build before probe commands.
        let mut probe_identities = Vec::new();
        if !r.is_empty() {
            let n = r.count(9)?;
            for _ in 0..n {
                let gen = r.u64()?;
                probe_identities.push((gen, r.bytes()?.to_vec()));
            }
        }
        // Later still: absent from an image of a build that did not carry them.
        let mut unsaved = Vec::new();
        if !r.is_empty() {
            let n = r.count(1)?;
            for _ in 0..n {
                unsaved.push(r.str()?.to_owned());
            }
        }
        r.end("the driver's state")?;
        Ok(DriverImage {
            config,
            clock_start_ns,
            epoch_unix_ms,
            lease,
            cgroup_root,
            keeper,
            children,
            clients,
            unverified,
            requester,
            exec_only,
            probe_identities,
            unsaved,
        })
    }
}

fn small(v: u8, max: u8, what: &str) -> Result<u8, ImageError> {
    if v > max {
        return Err(ImageError(format!("{v} is not a {what} mode")));
    }
    Ok(v)
}

fn path(r: &mut Reader<'_>) -> Result<PathBuf, ImageError> {
    use std::os::unix::ffi::OsStrExt;
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(r.bytes()?)))
}

fn fd(r: &mut Reader<'_>) -> Result<RawFd, ImageError> {
    r.opt_fd()?
        .ok_or_else(|| ImageError("a required descriptor is missing".into()))
}

fn write_rid(w: &mut Writer, rid: &RequestId) {
    match rid {
        RequestId::Null => {
            w.u8(0);
        }
        RequestId::U64(n) => {
            w.u8(1).u64(*n);
        }
        RequestId::Str(s) => {
            w.u8(2).str(s);
        }
    }
}

fn read_rid(r: &mut Reader<'_>) -> Result<RequestId, ImageError> {
    match r.u8()? {
        0 => Ok(RequestId::Null),
        1 => Ok(RequestId::U64(r.u64()?)),
        2 => Ok(RequestId::Str(r.str()?.to_owned())),
        t => Err(ImageError(format!("{t} is not a request id tag"))),
    }
}

fn write_child(w: &mut Writer, c: &ChildImage) {
    w.u64(c.gen).i32(c.pid).opt_fd(c.pidfd);
    match &c.token {
        None => w.u8(0),
        Some(t) => w.u8(1).str(t),
    };
    w.bool(c.is_child);
    for o in c.outputs {
        w.opt_fd(o);
    }
    w.opt_fd(c.stdin).opt_fd(c.hung_up_pty).bytes(&c.input);
    w.bool(c.close_input_when_written);
    match &c.cgroup {
        None => w.u8(0),
        Some((p, name)) => w.u8(1).bytes(p.as_os_str().as_encoded_bytes()).str(name),
    };
    w.bool(c.awaits_status);
}

fn read_child(r: &mut Reader<'_>) -> Result<ChildImage, ImageError> {
    let gen = r.u64()?;
    let pid = r.i32()?;
    if pid <= 0 {
        return Err(ImageError(format!("gen {gen}: {pid} is not a pid")));
    }
    let pidfd = r.opt_fd()?;
    let token = match r.u8()? {
        0 => None,
        1 => Some(r.str()?.to_owned()),
        t => return Err(ImageError(format!("{t} is not a token tag"))),
    };
    let is_child = r.bool()?;
    let outputs = [r.opt_fd()?, r.opt_fd()?, r.opt_fd()?];
    let stdin = r.opt_fd()?;
    let hung_up_pty = r.opt_fd()?;
    let input = r.bytes()?.to_vec();
    let close_input_when_written = r.bool()?;
    let cgroup = match r.u8()? {
        0 => None,
        1 => Some((path(r)?, r.str()?.to_owned())),
        t => return Err(ImageError(format!("{t} is not a cgroup tag"))),
    };
    Ok(ChildImage {
        gen,
        pid,
        pidfd,
        token,
        is_child,
        outputs,
        stdin,
        hung_up_pty,
        input,
        close_input_when_written,
        cgroup,
        awaits_status: r.bool()?,
    })
}

fn write_clients(w: &mut Writer, c: &ClientsImage) {
    w.i32(c.listener).u64(c.next_id).u64(c.next_request);
    w.count(c.clients.len());
    for cl in &c.clients {
        w.u64(cl.id).i32(cl.fd).bytes(&cl.partial).bool(cl.skipping);
        w.count(cl.pending.len());
        for l in &cl.pending {
            match l {
                LineImage::Line(b) => w.u8(0).bytes(b),
                LineImage::TooLong(limit) => w.u8(1).u64(*limit),
            };
        }
        w.count(cl.outbox.len());
        for piece in &cl.outbox {
            match piece {
                OutboxPiece::Bytes(b) => w.u8(0).bytes(b),
                OutboxPiece::Record { session, seq, skip } => {
                    w.u8(1).str(session).u64(*seq).u64(*skip)
                }
            };
        }
        w.bool(cl.paused).bool(cl.eof).u64(cl.waiting);
        w.count(cl.deferred.len());
        for d in &cl.deferred {
            w.str(&d.session).u64(d.seq).bytes(&d.line);
        }
        w.count(cl.cursors.len());
        for cur in &cl.cursors {
            w.str(&cur.session)
                .u64(cur.seq)
                .u64(cur.pos)
                .bool(cur.behind);
            w.opt_u64(cur.lossless_ms);
        }
        match &cl.all {
            None => w.u8(0),
            Some(replay) => w.u8(1).str(replay),
        };
        w.opt_u64(cl.all_lossless_ms);
    }
    w.count(c.waits.len());
    for wait in &c.waits {
        w.u64(wait.gen).u64(wait.client);
        write_rid(w, &wait.rid);
    }
    w.count(c.replies.len());
    for (request, client, rid) in &c.replies {
        w.u64(*request).u64(*client);
        write_rid(w, rid);
    }
}

fn read_clients(r: &mut Reader<'_>) -> Result<ClientsImage, ImageError> {
    let listener = fd(r)?;
    let next_id = r.u64()?;
    let next_request = r.u64()?;
    let n = r.count(8)?;
    let mut clients = Vec::with_capacity(n);
    for _ in 0..n {
        let id = r.u64()?;
        let fd = fd(r)?;
        let partial = r.bytes()?.to_vec();
        let skipping = r.bool()?;
        let n = r.count(1)?;
        let mut pending = Vec::with_capacity(n);
        for _ in 0..n {
            pending.push(match r.u8()? {
                0 => LineImage::Line(r.bytes()?.to_vec()),
                1 => LineImage::TooLong(r.u64()?),
                t => return Err(ImageError(format!("{t} is not a line tag"))),
            });
        }
        let n = r.count(9)?;
        let mut outbox = Vec::with_capacity(n);
        for _ in 0..n {
            outbox.push(match r.u8()? {
                0 => OutboxPiece::Bytes(r.bytes()?.to_vec()),
                1 => OutboxPiece::Record {
                    session: r.str()?.to_owned(),
                    seq: r.u64()?,
                    skip: r.u64()?,
                },
                t => return Err(ImageError(format!("{t} is not an outbox tag"))),
            });
        }
        let paused = r.bool()?;
        let eof = r.bool()?;
        let waiting = r.u64()?;
        let n = r.count(8)?;
        let mut deferred = Vec::with_capacity(n);
        for _ in 0..n {
            deferred.push(DeferredImage {
                session: r.str()?.to_owned(),
                seq: r.u64()?,
                line: r.bytes()?.to_vec(),
            });
        }
        let n = r.count(8)?;
        let mut cursors = Vec::with_capacity(n);
        for _ in 0..n {
            cursors.push(CursorImage {
                session: r.str()?.to_owned(),
                seq: r.u64()?,
                pos: r.u64()?,
                behind: r.bool()?,
                lossless_ms: r.opt_u64()?,
            });
        }
        let all = match r.u8()? {
            0 => None,
            1 => Some(r.str()?.to_owned()),
            t => return Err(ImageError(format!("{t} is not a subscription tag"))),
        };
        let all_lossless_ms = r.opt_u64()?;
        clients.push(ClientImage {
            id,
            fd,
            partial,
            skipping,
            pending,
            outbox,
            paused,
            eof,
            waiting,
            deferred,
            cursors,
            all,
            all_lossless_ms,
        });
    }
    let n = r.count(9)?;
    let mut waits = Vec::with_capacity(n);
    for _ in 0..n {
        waits.push(WaitImage {
            gen: r.u64()?,
            client: r.u64()?,
            rid: read_rid(r)?,
        });
    }
    let n = r.count(9)?;
    let mut replies = Vec::with_capacity(n);
    for _ in 0..n {
        replies.push((r.u64()?, r.u64()?, read_rid(r)?));
    }
    Ok(ClientsImage {
        listener,
        next_id,
        next_request,
        clients,
        waits,
        replies,
    })
}
