//! FUSE mounts that never answer, for tests of what must not wait on a dead filesystem and
//! of processes that cannot be killed.

use std::path::Path;

use genward::testkit::scratch::ScratchDir;

use super::sys::is_root;

/// A FUSE filesystem that never answers, like a dead NFS or sshfs server: `/dev/fuse` is
/// opened and mounted by a helper process (`cat`, set up between its fork and exec) in a
/// mount namespace of its own, so no one else on the machine can wander into it, and
/// nothing ever reads the device. Every request on it (even the first, `INIT`) waits
/// forever — in uninterruptible (killable) sleep — until the helper dies, which closes the
/// device and aborts the connection: the waiting calls then fail with `ENOTCONN`.
///
/// It is reached from our namespace through `/proc/<helper>/root`, which resolves paths in
/// the helper's mount tree.
pub struct HungMount {
    helper: std::process::Child,
    /// What a holding server says: a line per request it took.
    said: Option<std::io::BufReader<std::process::ChildStdout>>,
    _dir: ScratchDir,
    /// The mount point, as a path that works from our namespace.
    pub path: std::path::PathBuf,
}

/// A FUSE server (run with the device on descriptor 100) that answers `INIT`, then reads
/// every request and never answers it. A process whose request was read waits for the
/// answer in uninterruptible sleep, SIGKILL included, until the server dies.
const HOLDING_SERVER: &str = r#"
import os, struct
fd = 100
buf = os.read(fd, 1 << 20)
_, _, unique = struct.unpack_from('<IIQ', buf, 0)
_, minor, readahead, _ = struct.unpack_from('<IIII', buf, 40)
out = struct.pack('<IIIIHHIIHHI28x', 7, min(minor, 31), readahead, 0, 16, 12, 65536, 1, 0, 0, 0)
os.write(fd, struct.pack('<IiQ', 16 + len(out), 0, unique) + out)
while True:
    os.read(fd, 1 << 20)
    print('taken', flush=True)
"#;

impl HungMount {
    /// A mount nobody serves: every call on it waits (killably) until it is dropped.
    pub fn new(name: &str) -> Result<HungMount, String> {
        HungMount::served(name, None)
    }

    /// A mount whose server takes every request and never answers: a process that touches
    /// it cannot be killed until the mount is dropped. Needs `python3`.
    pub fn holding(name: &str) -> Result<HungMount, String> {
        HungMount::served(name, Some(HOLDING_SERVER))
    }

    fn served(name: &str, server: Option<&str>) -> Result<HungMount, String> {
        use std::ffi::CString;
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::process::CommandExt;
        use std::process::{Command, Stdio};

        if !is_root() {
            return Err("mounting FUSE needs root".into());
        }
        if !Path::new("/dev/fuse").exists() {
            return Err("no /dev/fuse".into());
        }
        let dir = ScratchDir::new(name);
        let mnt = dir.join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        // The device goes to a fixed descriptor so the options can be built before the fork.
        const DEV_FD: libc::c_int = 100;
        let target = CString::new(mnt.as_os_str().as_bytes()).unwrap();
        let options =
            CString::new(format!("fd={DEV_FD},rootmode=40000,user_id=0,group_id=0")).unwrap();
        let mut cmd = match server {
            None => Command::new("cat"),
            Some(script) => {
                let mut c = Command::new("python3");
                c.args(["-c", script]);
                c
            }
        };
        cmd.stdin(Stdio::piped());
        cmd.stdout(if server.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        // SAFETY: the closure runs in the forked child before exec and makes only
        // async-signal-safe system calls on strings built before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let check = |r: libc::c_int| {
                    if r < 0 {
                        Err(std::io::Error::last_os_error())
                    } else {
                        Ok(r)
                    }
                };
                check(libc::unshare(libc::CLONE_NEWNS))?;
                // Keep our mount out of the namespace we came from.
                check(libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ))?;
                let fd = check(libc::open(c"/dev/fuse".as_ptr(), libc::O_RDWR))?;
                if fd != DEV_FD {
                    check(libc::dup2(fd, DEV_FD))?;
                    libc::close(fd);
                }
                check(libc::mount(
                    c"genward-test".as_ptr(),
                    target.as_ptr(),
                    c"fuse".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    options.as_ptr().cast(),
                ))?;
                Ok(())
            });
        }
        let mut helper = match cmd.spawn() {
            Ok(helper) => helper,
            Err(e) => return Err(format!("cannot mount a FUSE filesystem: {e}")),
        };
        let path =
            Path::new(&format!("/proc/{}/root", helper.id())).join(mnt.strip_prefix("/").unwrap());
        let said = helper.stdout.take().map(std::io::BufReader::new);
        Ok(HungMount {
            helper,
            said,
            _dir: dir,
            path,
        })
    }

    /// Waits until a holding server has taken a request (which it will never answer).
    pub fn await_request(&mut self) {
        use std::io::BufRead;
        let said = self.said.as_mut().expect("a holding server");
        let mut line = String::new();
        let n = said.read_line(&mut line).expect("read the server's report");
        assert_eq!(line, "taken\n", "the FUSE server ended ({n} bytes)");
    }

    /// Aborts the connection: calls waiting on the mount fail with `ENOTCONN`.
    pub fn abort(&mut self) {
        let _ = self.helper.kill();
        let _ = self.helper.wait();
    }
}

impl Drop for HungMount {
    fn drop(&mut self) {
        // Before the scratch directory goes: nothing may hang on it any more.
        self.abort();
    }
}
