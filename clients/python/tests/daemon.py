"""A genward daemon of the test's own: the built binary on a private state directory in
a temporary directory, started before the tests that need it and stopped after them.

The binary is ``GENWARD_BIN`` if set, else the repository's ``target/release/genward``
or ``target/debug/genward`` (under ``CARGO_TARGET_DIR`` if set), whichever was built last.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Dict, Optional, Sequence

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def find_binary() -> str:
    env = os.environ.get("GENWARD_BIN")
    if env:
        if not os.access(env, os.X_OK):
            raise RuntimeError(f"GENWARD_BIN={env} is not an executable")
        return env
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
    candidates = [os.path.join(target, kind, "genward") for kind in ("release", "debug")]
    built = [c for c in candidates if os.access(c, os.X_OK)]
    if not built:
        raise RuntimeError(
            "no genward binary: build it (`make release` or `cargo build`) or set GENWARD_BIN"
        )
    return max(built, key=os.path.getmtime)


class Daemon:
    """One daemon on a state directory of its own; ``kill()`` + ``start()`` is a crash
    and a restart on the same directory (the sessions survive, held by the keeper)."""

    def __init__(self) -> None:
        self.binary = find_binary()
        self.dir = tempfile.mkdtemp(prefix="gw-py-")
        self.state_dir = os.path.join(self.dir, "state")
        self.socket = os.path.join(self.state_dir, "genward.sock")
        self.log_path = os.path.join(self.dir, "daemon.log")
        self.proc: Optional[subprocess.Popen] = None

    @property
    def env(self) -> Dict[str, str]:
        """The environment of a program that should find this daemon by default."""
        env = dict(os.environ)
        env["GENWARD_SOCKET"] = self.socket
        return env

    def start(self, socket: Optional[str] = None, args: Sequence[str] = ()) -> "Daemon":
        """Starts it (on ``socket`` instead of the usual path, if given; ``args``: more
        ``genward daemon`` arguments, e.g. ``["--config", path]``)."""
        r, w = os.pipe()
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                [self.binary, "--socket", socket or self.socket, "daemon", "--state-dir", self.state_dir,
                 "--ready-fd", str(w), "--keeper-hold", "1m", *args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, pass_fds=(w,),
                start_new_session=True,
            )
        finally:
            os.close(w)
            log.close()
        with os.fdopen(r, "rb") as ready:
            line = ready.readline()  # a newline once it serves; end of file if it died
        if not line:
            self.proc.wait(5)
            raise RuntimeError(f"the daemon did not start:\n{self.log()}")
        return self

    def kill(self) -> None:
        """SIGKILL: a crash, leaving its sessions to the keeper and the next daemon."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def close(self) -> None:
        self.stop()
        # A keeper left by a crash goes when its directory does.
        shutil.rmtree(self.dir, ignore_errors=True)
        time.sleep(0.05)

    def log(self) -> str:
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""


class DaemonPerClass:
    """Mixin for a test case: one daemon for the whole class, in ``cls.daemon``."""

    daemon: Daemon

    @classmethod
    def setUpClass(cls) -> None:
        cls.daemon = Daemon().start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.daemon.close()
