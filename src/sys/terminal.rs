//! The local terminal during `genward attach`: raw mode that is always undone, and the
//! window size to forward.
//!
//! Raw mode hands every keystroke (Ctrl-C, Ctrl-Z, the detach key) to us instead of the
//! line discipline. Leaving a shell's terminal raw after a crash, a lost daemon or a signal
//! makes it unusable, so [`RawMode`] restores the saved settings on `Drop` and also through
//! [`RawMode::restore`], which the signal-exit path calls before `exit` (which does not run
//! destructors). Restoring twice is harmless.

use rustix::fd::AsFd;
use rustix::io::{Errno, Result};
use rustix::termios::{self, OptionalActions, Termios};

/// A terminal switched to raw mode; its previous settings come back when this is dropped
/// or [`restore`](Self::restore)d.
#[derive(Debug)]
pub struct RawMode<Fd: AsFd> {
    fd: Fd,
    saved: Termios,
    /// Output processing kept (see [`enter_with`](Self::enter_with)).
    cooked_output: bool,
    active: bool,
}

impl<Fd: AsFd> RawMode<Fd> {
    /// `tcgetattr` then `cfmakeraw` + `tcsetattr(TCSANOW)`—saves the settings of the
    /// terminal `fd` and makes it raw: bytes arrive one at a time, unechoed, with no
    /// signal keys and no output processing.
    ///
    /// Fails with `ENOTTY` when `fd` is not a terminal (then nothing changed).
    ///
    /// # References
    ///  - [POSIX `tcsetattr`](https://pubs.opengroup.org/onlinepubs/9799919799/functions/tcsetattr.html)
    ///  - [Linux `termios(3)`](https://man7.org/linux/man-pages/man3/termios.3.html)
    pub fn enter(fd: Fd) -> Result<Self> {
        Self::enter_with(fd, false)
    }

    /// [`enter`](Self::enter), keeping the terminal's output processing when
    /// `cooked_output` (`\n` still starts a line: for output that comes from a program
    /// writing to a pipe, not to a terminal of its own).
    pub fn enter_with(fd: Fd, cooked_output: bool) -> Result<Self> {
        let saved = termios::tcgetattr(&fd)?;
        let mut mode = Self {
            fd,
            saved,
            cooked_output,
            active: false,
        };
        // Inactive until raw: a failure leaves nothing to undo.
        mode.reenter()?;
        Ok(mode)
    }

    /// The raw settings made from the saved ones.
    fn raw(&self) -> Termios {
        let mut raw = self.saved.clone();
        raw.make_raw();
        if self.cooked_output {
            raw.output_modes = self.saved.output_modes;
        }
        raw
    }

    /// `tcsetattr(TCSANOW)`—makes the terminal raw again after a [`restore`](Self::restore):
    /// a program stopped by job control (`SIGTSTP`) gives the shell a sane terminal and
    /// takes raw mode back when continued (`SIGCONT`), as tmux and ssh do. The settings
    /// put back later are still the ones saved on entering: what the shell may have
    /// changed meanwhile is its own business, undone by the shell when it reads again.
    pub fn reenter(&mut self) -> Result<()> {
        set(&self.fd, &self.raw())?;
        self.active = true;
        Ok(())
    }

    /// The settings that were in force before raw mode and will be put back.
    pub fn saved(&self) -> &Termios {
        &self.saved
    }

    /// `tcsetattr(TCSANOW)`—puts the saved settings back now. Later calls and the drop do
    /// nothing, even if this one failed (the terminal may be gone; retrying cannot help).
    pub fn restore(&mut self) -> Result<()> {
        if !self.active {
            return Ok(());
        }
        self.active = false;
        set(&self.fd, &self.saved)
    }
}

impl<Fd: AsFd> Drop for RawMode<Fd> {
    fn drop(&mut self) {
        // Nothing useful can be done with an error while unwinding or exiting.
        let _ = self.restore();
    }
}

/// `tcsetattr(TCSANOW)`, retried on `EINTR`—puts `settings` on the terminal `fd`.
///
/// For exit paths that cannot reach the [`RawMode`] value: the release build aborts on
/// panic, so destructors do not run; a panic hook holding a clone of
/// [`RawMode::saved`] calls this on standard input instead.
///
/// # References
///  - [POSIX `tcsetattr`](https://pubs.opengroup.org/onlinepubs/9799919799/functions/tcsetattr.html)
pub fn restore_settings(fd: impl AsFd, settings: &Termios) -> Result<()> {
    set(fd, settings)
}

/// `tcsetattr` retried on `EINTR` (a resize signal may land in the middle).
fn set(fd: impl AsFd, settings: &Termios) -> Result<()> {
    loop {
        match termios::tcsetattr(fd.as_fd(), OptionalActions::Now, settings) {
            Err(Errno::INTR) => continue,
            other => return other,
        }
    }
}

/// A terminal's size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSize {
    /// Lines.
    pub rows: u16,
    /// Columns.
    pub cols: u16,
}

/// `ioctl(fd, TIOCGWINSZ)`—the size of the terminal `fd`, to send to the session's PTY
/// on attach and on every `SIGWINCH`.
///
/// # References
///  - [Linux `ioctl_tty(2)`](https://man7.org/linux/man-pages/man2/ioctl_tty.2.html)
pub fn window_size(fd: impl AsFd) -> Result<WindowSize> {
    let ws = termios::tcgetwinsize(fd)?;
    Ok(WindowSize {
        rows: ws.ws_row,
        cols: ws.ws_col,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fd::{AsRawFd, OwnedFd};
    use rustix::fs::{Mode, OFlags};
    use rustix::pty::{self, OpenptFlags};
    use rustix::termios::{InputModes, LocalModes, OutputModes, Winsize};

    /// A real PTY pair: (controller, terminal side).
    fn pty_pair() -> (OwnedFd, OwnedFd) {
        let controller =
            pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)
                .expect("openpt");
        pty::grantpt(&controller).expect("grantpt");
        pty::unlockpt(&controller).expect("unlockpt");
        let name = pty::ptsname(&controller, Vec::new()).expect("ptsname");
        let flags = OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC;
        let terminal = rustix::fs::open(name.as_c_str(), flags, Mode::empty()).expect("open peer");
        (controller, terminal)
    }

    /// The kernel's view of the settings, compared field by field through libc so that
    /// "restored" means every byte, including the speeds and the control characters.
    fn kernel_termios(fd: &OwnedFd) -> libc::termios {
        // SAFETY: `termios` is plain old data, so all-zero is a valid value to overwrite.
        let mut t: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: the fd is open for the duration of the call and `t` is a valid,
        // exclusively borrowed `termios` for tcgetattr to fill in.
        let rc = unsafe { libc::tcgetattr(fd.as_raw_fd(), &mut t) };
        assert_eq!(rc, 0, "tcgetattr: {}", std::io::Error::last_os_error());
        t
    }

    fn same(a: &libc::termios, b: &libc::termios) -> bool {
        a.c_iflag == b.c_iflag
            && a.c_oflag == b.c_oflag
            && a.c_cflag == b.c_cflag
            && a.c_lflag == b.c_lflag
            && a.c_line == b.c_line
            && a.c_cc == b.c_cc
            && a.c_ispeed == b.c_ispeed
            && a.c_ospeed == b.c_ospeed
    }

    #[test]
    fn raw_mode_changes_flags_and_drop_restores_every_byte() {
        let (_controller, terminal) = pty_pair();
        let before = kernel_termios(&terminal);
        assert!(termios::tcgetattr(&terminal)
            .unwrap()
            .local_modes
            .contains(LocalModes::ECHO));
        {
            let raw = RawMode::enter(&terminal).expect("enter raw mode");
            let now = termios::tcgetattr(&terminal).unwrap();
            assert!(!now
                .local_modes
                .intersects(LocalModes::ECHO | LocalModes::ICANON | LocalModes::ISIG));
            assert!(!now
                .input_modes
                .intersects(InputModes::ICRNL | InputModes::IXON));
            assert!(!now.output_modes.contains(OutputModes::OPOST));
            assert!(!same(&before, &kernel_termios(&terminal)));
            assert!(raw.saved().local_modes.contains(LocalModes::ECHO));
        }
        assert!(
            same(&before, &kernel_termios(&terminal)),
            "drop did not restore"
        );
    }

    #[test]
    fn explicit_restore_then_drop_is_harmless() {
        let (_controller, terminal) = pty_pair();
        let before = kernel_termios(&terminal);
        let mut raw = RawMode::enter(&terminal).expect("enter raw mode");
        raw.restore().expect("restore");
        assert!(same(&before, &kernel_termios(&terminal)));
        // Someone else changes the terminal after our restore: a later drop must not undo it.
        let mut other = termios::tcgetattr(&terminal).unwrap();
        other.local_modes.remove(LocalModes::ECHO);
        termios::tcsetattr(&terminal, OptionalActions::Now, &other).unwrap();
        let changed = kernel_termios(&terminal);
        raw.restore().expect("second restore is a no-op");
        drop(raw);
        assert!(same(&changed, &kernel_termios(&terminal)));
    }

    #[test]
    fn reenter_after_restore_is_raw_again_and_drop_restores() {
        let (_controller, terminal) = pty_pair();
        let before = kernel_termios(&terminal);
        let mut raw = RawMode::enter(&terminal).expect("enter raw mode");
        let raw_settings = kernel_termios(&terminal);
        // As on SIGTSTP, then SIGCONT.
        raw.restore().expect("restore");
        assert!(same(&before, &kernel_termios(&terminal)));
        raw.reenter().expect("reenter");
        assert!(same(&raw_settings, &kernel_termios(&terminal)));
        drop(raw);
        assert!(same(&before, &kernel_termios(&terminal)));
    }

    #[test]
    fn saved_settings_restore_without_the_guard() {
        let (_controller, terminal) = pty_pair();
        let before = kernel_termios(&terminal);
        let raw = RawMode::enter(&terminal).expect("enter raw mode");
        let saved = raw.saved().clone();
        // As on an abort: the guard's destructor never runs.
        std::mem::forget(raw);
        assert!(!same(&before, &kernel_termios(&terminal)));
        restore_settings(&terminal, &saved).expect("restore");
        assert!(same(&before, &kernel_termios(&terminal)));
    }

    #[test]
    fn not_a_terminal_is_enotty_and_changes_nothing() {
        let (reader, _writer) = rustix::pipe::pipe().expect("pipe");
        assert_eq!(RawMode::enter(&reader).err(), Some(Errno::NOTTY));
        assert_eq!(window_size(&reader).err(), Some(Errno::NOTTY));
    }

    #[test]
    fn window_size_reads_what_the_controller_set() {
        let (controller, terminal) = pty_pair();
        let ws = Winsize {
            ws_row: 42,
            ws_col: 137,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        termios::tcsetwinsize(&controller, ws).expect("set size");
        assert_eq!(
            window_size(&terminal),
            Ok(WindowSize {
                rows: 42,
                cols: 137
            })
        );
    }
}
