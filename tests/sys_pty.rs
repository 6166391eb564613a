//! PTY mode: a real terminal, its size and resizes, Ctrl-C through the line discipline,
//! and output written just before exit still read.

mod util;

use std::ffi::OsString;
use std::os::fd::AsFd;

use genward::sys::process::Exit;
use genward::sys::pty::resize;
use genward::sys::spawn::{spawn, IoMode};
use util::sys::*;

#[test]
fn child_sees_a_terminal_on_all_three_descriptors() {
    let req = pty_request(
        &[
            "sh",
            "-c",
            "test -t 0 && test -t 1 && test -t 2 && echo IS-A-TTY; echo TERM=$TERM",
        ],
        24,
        80,
    );
    let mut child = spawn(&req).unwrap();
    assert!(child.stdin.is_none() && child.stdout.is_none());
    let out = lossy(&read_to_eof(child.pty.as_ref().unwrap().as_fd()));
    assert!(out.contains("IS-A-TTY"), "{out:?}");
    assert!(out.contains("TERM=xterm-256color"), "{out:?}");
    assert_eq!(wait_reap(&mut child.process), Exit::Code(0));
}

#[test]
fn term_can_be_chosen() {
    let mut req = pty_request(&["sh", "-c", "echo TERM=$TERM"], 24, 80);
    req.io = IoMode::Pty {
        rows: 24,
        cols: 80,
        term: Some(OsString::from("vt100")),
    };
    let mut child = spawn(&req).unwrap();
    let out = lossy(&read_to_eof(child.pty.as_ref().unwrap().as_fd()));
    assert!(out.contains("TERM=vt100"), "{out:?}");
    wait_reap(&mut child.process);
}

#[test]
fn initial_size_is_seen_by_stty() {
    let mut child = spawn(&pty_request(&["stty", "size"], 33, 111)).unwrap();
    let out = lossy(&read_to_eof(child.pty.as_ref().unwrap().as_fd()));
    assert_eq!(out.trim(), "33 111");
    assert_eq!(wait_reap(&mut child.process), Exit::Code(0));
}

#[test]
fn resize_delivers_sigwinch_and_the_new_size() {
    let script = "trap 'stty size; exit 0' WINCH; echo READY; while :; do sleep 0.05; done";
    let mut child = spawn(&pty_request(&["sh", "-c", script], 24, 80)).unwrap();
    let master = child.pty.take().unwrap();
    let mut out = Vec::new();
    read_until(master.as_fd(), &mut out, "READY");
    resize(master.as_fd(), 40, 132).unwrap();
    read_until(master.as_fd(), &mut out, "40 132");
    assert_eq!(wait_reap(&mut child.process), Exit::Code(0));
}

#[test]
fn ctrl_c_byte_becomes_sigint() {
    // `cat` keeps default SIGINT handling: the line discipline turns ^C into SIGINT for the
    // terminal's foreground group, which is the child's own.
    let mut child = spawn(&pty_request(&["sh", "-c", "echo READY; exec cat"], 24, 80)).unwrap();
    let master = child.pty.take().unwrap();
    let mut out = Vec::new();
    read_until(master.as_fd(), &mut out, "READY");
    // Echo proves cat is reading before the interrupt is sent.
    write_all(master.as_fd(), b"ping\n");
    read_until(master.as_fd(), &mut out, "ping\r\nping");
    write_all(master.as_fd(), b"\x03");
    let exit = wait_reap(&mut child.process);
    assert_eq!(exit, by_signal(libc::SIGINT));
}

#[test]
fn output_written_before_exit_is_not_lost() {
    let mut child = spawn(&pty_request(
        &["sh", "-c", "echo last-words; exit 3"],
        24,
        80,
    ))
    .unwrap();
    let master = child.pty.take().unwrap();
    // Wait for the exit first, then read: the bytes are still in the PTY buffer, then EIO.
    assert_eq!(wait_reap(&mut child.process), Exit::Code(3));
    let out = lossy(&read_to_eof(master.as_fd()));
    assert_eq!(out, "last-words\r\n");
}
