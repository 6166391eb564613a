//! A child across daemons: taken back after a restart (with the descriptors a keeper held
//! for it, or without any), its descriptors held by the keeper while it runs, and carried
//! whole across an upgrade.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use mio::Registry;

use super::Child;
use crate::core::Stream;
use crate::driver::upgrade::state::ChildImage;
use crate::keeper::wire::{Role, Roles};
use crate::sys::cgroup::GenCgroup;
use crate::sys::process::Process;

impl Child {
    /// A process a previous daemon started, taken back: watched through its pidfd, with
    /// no streams of ours.
    pub fn adopted(
        gen: u64,
        process: Process,
        cgroup: Option<GenCgroup>,
        registry: &Registry,
    ) -> Child {
        Child::adopted_with_io(gen, process, cgroup, [None, None, None], None, registry)
    }

    /// A process a previous daemon started, taken back with the descriptors a keeper
    /// held for it: its streams (by [`Stream::index`]) and stdin are registered and used
    /// exactly like a spawned child's. They are the same open files the previous daemon
    /// read and wrote (already non-blocking; made so again in case).
    pub fn adopted_with_io(
        gen: u64,
        process: Process,
        cgroup: Option<GenCgroup>,
        outputs: [Option<OwnedFd>; 3],
        stdin: Option<OwnedFd>,
        registry: &Registry,
    ) -> Child {
        for fd in outputs.iter().chain([&stdin]).flatten() {
            if let Err(e) = crate::sys::fd::set_nonblocking(fd) {
                log::warn!("gen {gen}: a descriptor taken back: {e}");
            }
        }
        let mut child = Child {
            gen,
            process,
            outputs,
            stdin,
            hung_up_pty: None,
            pty_hangup_seen: false,
            stdin_reader_gone: false,
            pty_writable_watched: false,
            pidfd_watched: false,
            input: Vec::new(),
            close_input_when_written: false,
            last_written: None,
            cgroup,
            watch: None,
            closed: Roles::NONE,
            counted: 0,
            small_pipes: [false; 3],
        };
        // Its cgroup's events too, where it kept one: its emptiness is how its end is seen.
        child.register_all(registry, true);
        child
    }

    /// The descriptors a keeper is to hold for it, in role order: its pidfd, stdin and
    /// open output streams.
    pub fn keepable(&self) -> (Roles, Vec<BorrowedFd<'_>>) {
        let all = [
            (Role::Pidfd, self.process.pidfd()),
            (Role::Stdin, self.stdin.as_ref().map(AsFd::as_fd)),
            (Role::Stdout, self.output(Stream::Stdout)),
            (Role::Stderr, self.output(Stream::Stderr)),
            (Role::Pty, self.output(Stream::Pty)),
        ];
        let mut roles = Roles::NONE;
        let mut fds = Vec::with_capacity(all.len());
        for (role, fd) in all {
            if let Some(fd) = fd {
                roles = roles.with(role);
                fds.push(fd);
            }
        }
        (roles, fds)
    }

    /// The roles a keeper holds for it that it has closed since the last call (EOF, the
    /// drain deadline, its input closed): the keeper's copies are to go too, or a child
    /// would never see its stdin close, nor a grandchild its pipe's reader go.
    pub fn take_closed(&mut self) -> Roles {
        std::mem::take(&mut self.closed)
    }

    /// Its state for an upgrade image: its process and the numbers of the descriptors
    /// it holds, its unwritten input, its cgroup's path. A session watch is not carried:
    /// the next program walks the session afresh when asked.
    pub fn export(&self) -> ChildImage {
        let raw = |fd: &Option<OwnedFd>| fd.as_ref().map(AsRawFd::as_raw_fd);
        ChildImage {
            gen: self.gen,
            pid: self.process.pid(),
            pidfd: self.process.pidfd().map(|fd| fd.as_raw_fd()),
            token: self.process.token().map(str::to_owned),
            is_child: self.process.is_child(),
            outputs: [
                raw(&self.outputs[0]),
                raw(&self.outputs[1]),
                raw(&self.outputs[2]),
            ],
            stdin: raw(&self.stdin),
            hung_up_pty: raw(&self.hung_up_pty),
            input: self.input.clone(),
            close_input_when_written: self.close_input_when_written,
            cgroup: self
                .cgroup
                .as_ref()
                .map(|cg| (cg.path().to_owned(), cg.name_in_hierarchy().to_owned())),
            awaits_status: false,
        }
    }

    /// A generation carried across an upgrade, on its inherited descriptors (checked
    /// open and named once), registered again. A cgroup that cannot be opened again is
    /// logged: the generation then has session containment's view of its tree.
    pub fn resumed(image: ChildImage, registry: &Registry) -> Child {
        let own = |fd: Option<i32>| {
            fd.map(|raw| {
                // SAFETY: the image's descriptors were checked open and named once; each
                // is taken by exactly one owner.
                let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
                let _ = crate::sys::reexec::set_close_on_exec(fd.as_fd(), true);
                fd
            })
        };
        let gen = image.gen;
        let pid = rustix::process::Pid::from_raw(image.pid).expect("checked positive");
        let process = Process::resumed(pid, own(image.pidfd), image.token, image.is_child);
        let cgroup = image.cgroup.and_then(|(path, name)| {
            GenCgroup::reopen(path, name)
                .map_err(|e| log::warn!("gen {gen}: opening its cgroup again: {e}"))
                .ok()
        });
        let mut child = Child {
            gen,
            process,
            outputs: [
                own(image.outputs[0]),
                own(image.outputs[1]),
                own(image.outputs[2]),
            ],
            stdin: own(image.stdin),
            hung_up_pty: own(image.hung_up_pty),
            pty_hangup_seen: false,
            stdin_reader_gone: false,
            pty_writable_watched: false,
            pidfd_watched: false,
            input: image.input,
            close_input_when_written: image.close_input_when_written,
            last_written: None,
            cgroup,
            watch: None,
            closed: Roles::NONE,
            counted: 0,
            small_pipes: [false; 3],
        };
        child.register_all(registry, false);
        child
    }
}
