//! A FUSE mount that never answers, for tests of what must not wait on a dead filesystem.

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
    _dir: ScratchDir,
    /// The mount point, as a path that works from our namespace.
    pub path: std::path::PathBuf,
}

impl HungMount {
    pub fn new(name: &str) -> Result<HungMount, String> {
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
        let mut cmd = Command::new("cat");
        cmd.stdin(Stdio::piped()).stdout(Stdio::null());
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
        let helper = match cmd.spawn() {
            Ok(helper) => helper,
            Err(e) => return Err(format!("cannot mount a FUSE filesystem: {e}")),
        };
        let path =
            Path::new(&format!("/proc/{}/root", helper.id())).join(mnt.strip_prefix("/").unwrap());
        Ok(HungMount {
            helper,
            _dir: dir,
            path,
        })
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
