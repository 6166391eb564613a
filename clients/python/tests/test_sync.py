"""The synchronous Client against a real daemon."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import threading
import time
import unittest
from typing import Dict, Iterator, List, Tuple, Union

import genward
from genward import Dropped, Exit, Output

from .daemon import Daemon, DaemonPerClass

PY = "python3"
FLOOD = 64 << 20
# 64 MiB of bytes that are not text: every byte value, in an order that never repeats
# within a chunk.
FLOOD_SCRIPT = (
    "import sys\n"
    "chunk = bytes((i * 7 + (i >> 8)) & 255 for i in range(1 << 16))\n"
    f"for _ in range({FLOOD} >> 16): sys.stdout.buffer.write(chunk)\n"
)


@functools.lru_cache(maxsize=None)
def flood_digest() -> str:
    chunk = bytes((i * 7 + (i >> 8)) & 255 for i in range(1 << 16))
    h = hashlib.sha256()
    for _ in range(FLOOD >> 16):
        h.update(chunk)
    return h.hexdigest()


class LetGoOnFullQueue(logging.Handler):
    """Creates ``path`` (which lets go a process that reads nothing until it exists) the
    first time the client says a write waits for room in the daemon's input queue."""

    def __init__(self, path: str) -> None:
        super().__init__(logging.DEBUG)
        self.path = path
        self.seen = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "waits for room" in record.getMessage():
            self.seen += 1
            if self.seen == 1:
                open(self.path, "wb").close()


@contextlib.contextmanager
def let_go_on_full_queue(path: str) -> Iterator[LetGoOnFullQueue]:
    logger = logging.getLogger("genward")
    handler = LetGoOnFullQueue(path)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


#: Reads nothing until the file ``$1`` exists, then copies its input into the file ``$2``.
READS_ONCE_LET_GO = 'while [ ! -e "$1" ]; do sleep 0.01; done; exec cat > "$2"'


class DaemonCase(DaemonPerClass, unittest.TestCase):
    """A daemon for the class; a client per test."""

    def setUp(self) -> None:
        self.client = genward.Client(self.daemon.socket)
        self.addCleanup(self.client.close)

    def name(self) -> str:
        return self.id().rsplit(".", 1)[-1].replace("test_", "")[:60]


class TestConnect(DaemonCase):
    def test_hello_checks_protocol_and_capabilities(self) -> None:
        info = self.client.server
        assert info is not None
        self.assertEqual(info.protocol, genward.PROTOCOL)
        self.assertIn("if_gen", info.capabilities)
        self.assertEqual(self.client.hello().pid, info.pid)

    def test_default_socket_from_environment(self) -> None:
        old = os.environ.get("GENWARD_SOCKET")
        os.environ["GENWARD_SOCKET"] = self.daemon.socket
        try:
            with genward.Client() as c:
                self.assertEqual(c.path, self.daemon.socket)
                self.assertIsNotNone(c.server)
        finally:
            if old is None:
                del os.environ["GENWARD_SOCKET"]
            else:
                os.environ["GENWARD_SOCKET"] = old

    def test_no_daemon_is_a_typed_error(self) -> None:
        with self.assertRaises(genward.NoDaemon):
            genward.Client(os.path.join(self.daemon.dir, "nothing.sock"))

    def test_requests_are_pipelined_from_threads(self) -> None:
        p = self.client.spawn(self.name(), ["sleep", "30"], grace="100ms")
        results: List[str] = []

        def ask() -> None:
            for _ in range(50):
                results.append(self.client.get(p.session).state)

        threads = [threading.Thread(target=ask) for _ in range(4)]
        for t in threads:
            t.start()
        # A wait pending on the same connection does not hold the others up.
        waiter = threading.Thread(target=p.wait)
        waiter.start()
        for t in threads:
            t.join(30)
        self.assertEqual(results, ["running"] * 200)
        p.stop()
        waiter.join(30)
        self.assertEqual(p.exit.cause, "stopped")


class TestSpawn(DaemonCase):
    def test_spawn_returns_a_running_handle(self) -> None:
        p = self.client.spawn(self.name(), ["sh", "-c", "echo hi; exit 3"])
        self.assertIsInstance(p.pid, int)
        end = p.wait(10)
        self.assertEqual((end.code, end.signal, end.cause, end.gen), (3, None, "exited", p.gen))
        self.assertEqual(p.read_all(10), b"hi\n")

    def test_spawn_failure_carries_the_reason(self) -> None:
        with self.assertRaises(genward.SpawnFailed) as cm:
            self.client.spawn(self.name(), ["genward-no-such-program-xyz"])
        self.assertEqual(cm.exception.kind, "not_found")
        self.assertIn("genward-no-such-program-xyz", cm.exception.message)
        self.assertIsInstance(cm.exception.gen, int)
        with self.assertRaises(genward.SpawnFailed) as cm:
            self.client.spawn(self.name() + "-cwd", ["true"], cwd="/no/such/dir")
        self.assertEqual(cm.exception.kind, "not_found")

    def test_run_as_options_reach_the_daemon(self) -> None:
        env_file = os.path.join(self.daemon.dir, "app.env")
        with open(env_file, "w") as f:
            f.write("FROM_FILE=yes\n")
        uid, gid = os.geteuid(), os.getegid()
        script = 'echo "u=$(id -u) g=$(id -g) m=$(umask) n=$(ulimit -n) c=$(ulimit -c) f=$FROM_FILE"'
        limits: Dict[str, genward.RlimitValue] = {"nofile": 321, "core": genward.Rlimit(0, "infinity")}
        umasks: List[Tuple[Union[str, int], str]] = [("027", "0027"), (0o077, "0077")]
        for umask, shown in umasks:
            p = self.client.spawn(
                self.name(), ["sh", "-c", script], user=uid, group=gid, umask=umask, env_file=env_file, rlimits=limits
            )
            self.assertEqual(p.wait(10).code, 0)
            self.assertEqual(p.read_all(10).decode().strip(), f"u={uid} g={gid} m={shown} n=321 c=0 f=yes")
        spec = self.client.get(self.name()).raw["spec"]
        self.assertEqual(spec["umask"], "077")
        self.assertEqual(spec["env_file"], env_file)
        self.assertEqual(spec["rlimits"], {"core": {"soft": 0, "hard": "infinity"}, "nofile": 321})
        # Names are looked up at the start, which fails naming the field.
        with self.assertRaises(genward.SpawnFailed) as cm:
            self.client.spawn(self.name() + "-who", ["true"], user="genward-no-such-user")
        self.assertIn("user: no user named `genward-no-such-user`", cm.exception.message)
        with self.assertRaises(ValueError):
            self.client.spawn(self.name() + "-mask", ["true"], umask=0o1000)

    def test_bad_request_is_typed(self) -> None:
        with self.assertRaises(genward.BadRequest):
            self.client.spawn(".bad", ["true"])
        with self.assertRaises(genward.NoSuchSession):
            self.client.get("never-spawned")


class TestOutput(DaemonCase):
    def test_output_is_byte_exact_including_invalid_utf8(self) -> None:
        data = bytes(range(256)) * 3 + b"\xff\xfe\xc3(\n{\"event\":\"output\"}\n\x00"
        script = f"import sys; sys.stdout.buffer.write({data!r}); sys.stderr.buffer.write(b'\\xc0err')"
        p = self.client.spawn(self.name(), [PY, "-c", script])
        out = b""
        err = b""
        for ev in p.events(10):
            if isinstance(ev, Output):
                if ev.stream == "stdout":
                    out += ev.data
                else:
                    err += ev.data
        self.assertEqual(out, data)
        self.assertEqual(err, b"\xc0err")
        self.assertEqual(p.exit.code, 0)

    def test_flood_64mib(self) -> None:
        h = hashlib.sha256()
        n = [0]
        dropped: List[Dropped] = []
        done = threading.Event()

        def on_data(b: bytes) -> None:
            h.update(b)
            n[0] += len(b)

        p = self.client.spawn(self.name(), [PY, "-c", FLOOD_SCRIPT], lossless=True, keep=1 << 20)
        p.on_data(on_data)
        p.on_dropped(dropped.append)
        p.on_exit(lambda e: done.set())
        end = p.wait(120)
        self.assertTrue(done.wait(60))
        self.assertEqual(end.code, 0)
        self.assertEqual(dropped, [])
        self.assertEqual(n[0], FLOOD)
        self.assertEqual(h.hexdigest(), flood_digest())

    def test_flood_64mib_iterated(self) -> None:
        h = hashlib.sha256()
        n = 0
        p = self.client.spawn(self.name(), [PY, "-c", FLOOD_SCRIPT], lossless=True)
        for chunk in p:
            h.update(chunk)
            n += len(chunk)
        self.assertEqual(n, FLOOD)
        self.assertEqual(h.hexdigest(), flood_digest())
        self.assertEqual(p.exit.code, 0)

    def test_a_slow_iterator_holds_the_output_back_and_may_call_the_client(self) -> None:
        total = 8 << 20
        script = f"import sys\nsys.stdout.buffer.write(b'y' * {total}); sys.stdout.flush()\nsys.stdin.readline()"
        p = self.client.spawn(self.name(), [PY, "-c", script], lossless=True, keep=256 << 10)
        n = 0
        wrote = False
        for ev in p.events(30):
            self.assertNotIsInstance(ev, Dropped)
            if isinstance(ev, Output):
                n += len(ev.data)
                time.sleep(0.002)  # slower than the daemon
                if not wrote and n > (1 << 20):
                    p.write("done\n")  # an answer is read even while the reader holds back
                    wrote = True
        self.assertEqual((n, p.exit.code), (total, 0))

    def test_a_loop_may_wait_on_another_handle_while_behind(self) -> None:
        # The loop's own stream is full while it waits for another process's end, whose
        # answer comes behind the output it has not taken: the client reads on for it.
        total = 8 << 20
        flood = self.client.spawn(self.name(), [PY, "-c", f"import sys; sys.stdout.buffer.write(b'z' * {total})"], lossless=True, keep=64 << 10)
        other = self.client.spawn(self.name() + "-other", ["sh", "-c", "sleep 0.3"])
        n = 0
        for chunk in flood:
            if n == 0:
                self.assertEqual(other.wait(10).code, 0)
                self.assertEqual(self.client.wait(other.session, other.gen, timeout=10).code, 0)
            n += len(chunk)
        self.assertEqual(n, total)

    def test_a_slow_data_callback_holds_the_output_back_within_keep(self) -> None:
        # A callback that takes nothing for a while: the client must not read on and queue
        # the output for it without bound, but hold back (the daemon then holds the
        # lossless session's output back) once `keep` bytes wait for it.
        keep, total = 256 << 10, 16 << 20
        name = self.name()
        script = f"import sys\nsys.stdin.readline()\nsys.stdout.buffer.write(b'c' * {total})"
        p = self.client.spawn(name, [PY, "-c", script], lossless=True, keep=keep)
        release = threading.Event()
        got = [0]
        dropped: List[Dropped] = []

        def on_data(data: bytes) -> None:
            release.wait(60)
            got[0] += len(data)

        p.on_data(on_data)
        p.on_dropped(dropped.append)
        p.write("go\n")
        # What the client may have read beyond what the callback took: `keep`, plus what
        # one read of the socket brings (1 MiB, and a frame it cut short before it).
        bound = keep + (2 << 20) + 4096
        client = self.client

        def read() -> int:
            return client._follows[name].next_pos or 0

        with client._cond:
            settled = client._cond.wait_for(lambda: client._must_hold_back() or read() > bound, 60)
            was_read = read()
        release.set()
        self.assertTrue(settled)
        self.assertLessEqual(was_read, bound)
        self.assertEqual(p.wait(60).code, 0)
        self.assertEqual((got[0], dropped), (total, []))

    def test_a_late_listener_hears_from_the_start(self) -> None:
        p = self.client.spawn(self.name(), ["sh", "-c", "echo early; exit 0"])
        p.wait(10)
        got: List[bytes] = []
        exits: List[Exit] = []
        heard = threading.Event()
        p.on_data(got.append)
        p.on_exit(lambda e: (exits.append(e), heard.set()))
        self.assertTrue(heard.wait(10))
        self.assertEqual(b"".join(got), b"early\n")
        self.assertEqual(exits[0].cause, "exited")

    def test_output_discarded_before_the_first_listener_is_reported_as_dropped(self) -> None:
        # The handle keeps `keep` bytes for its first `on_data` listener; what it let go
        # before the listener was added is a gap that listener's output has, reported to
        # `on_dropped` (to the first one added, if none was there when the output came).
        keep, total = 64 << 10, 8 << 20
        for dropped_first in (True, False):
            with self.subTest(on_dropped_added_first=dropped_first):
                p = self.client.spawn(f"held-{dropped_first}", [PY, "-c", f"import sys; sys.stdout.buffer.write(b'd' * {total})"], keep=keep)
                p.wait(30)
                got: List[bytes] = []
                dropped: List[Dropped] = []
                if dropped_first:
                    p.on_dropped(dropped.append)
                    p.on_data(got.append)
                else:
                    p.on_data(got.append)
                    p.on_dropped(dropped.append)
                p.wait(10)  # returns after the callbacks queued before
                n = sum(map(len, got))
                self.assertTrue(dropped, f"the gap was not reported; got {n} bytes")
                self.assertEqual(n + sum(d.missed for d in dropped), total)
                self.assertEqual(dropped[-1].end, total - n, "the gap ends where the output heard begins")


class TestControl(DaemonCase):
    def test_input_text_and_bytes(self) -> None:
        p = self.client.spawn(self.name(), ["cat"])
        p.write("héllo\n")
        p.write(b"\x00\xff\xfe\n")
        p.close_input()
        self.assertEqual(p.read_all(10), "héllo\n".encode() + b"\x00\xff\xfe\n")
        self.assertEqual(p.exit.code, 0)

    def test_a_long_write_to_a_slow_reader_gets_there_whole(self) -> None:
        script = (
            "import sys, time, hashlib\nh = hashlib.sha256(); n = 0\nwhile True:\n"
            " b = sys.stdin.buffer.read1(65536)\n if not b: break\n h.update(b); n += len(b); time.sleep(0.002)\n"
            "print(n, h.hexdigest())"
        )
        p = self.client.spawn(self.name(), [PY, "-c", script])
        data = os.urandom(6 << 20)
        # More than the daemon queues (1 MiB): the write waits for the reader as it goes.
        p.write(data)
        p.close_input()
        n, digest = p.read_all(60).split()
        self.assertEqual(int(n), len(data))
        self.assertEqual(hashlib.sha256(data).hexdigest().encode(), digest)

    def test_a_write_waits_for_room_in_the_daemons_input_queue(self) -> None:
        # 3 MiB to a process that reads nothing until let go, which it is once the daemon
        # refused a piece for want of room: from then on the write goes on only by waiting.
        go = os.path.join(self.daemon.dir, self.name() + ".go")
        got = os.path.join(self.daemon.dir, self.name() + ".got")
        p = self.client.spawn(self.name(), ["sh", "-c", READS_ONCE_LET_GO, "sh", go, got])
        data = os.urandom(3 << 20)
        with let_go_on_full_queue(go) as full:
            p.write(data)
        self.assertGreater(full.seen, 0)
        p.close_input()
        self.assertEqual(p.wait(30).code, 0)
        with open(got, "rb") as f:
            self.assertTrue(f.read() == data, "the bytes, in order")

    def test_a_write_without_room_for_the_clients_timeout_raises_limit(self) -> None:
        client = genward.Client(self.daemon.socket, timeout=0.5)
        self.addCleanup(client.close)
        p = client.spawn(self.name(), ["sleep", "1000"])
        with self.assertRaises(genward.Limit) as caught:
            p.write(os.urandom(3 << 20))
        self.assertIn("already queued", caught.exception.message)
        p.stop()
        self.assertEqual(p.wait(10).cause, "stopped")

    def test_a_request_past_the_line_limit_is_refused_at_once(self) -> None:
        start = time.monotonic()
        with self.assertRaises(genward.Limit):
            self.client.spawn(self.name(), ["true"], env={"BIG": "x" * (1 << 20)})
        self.assertLess(time.monotonic() - start, 5)
        self.assertEqual(self.client.spawn(self.name(), ["true"]).wait(10).cause, "exited")

    def test_long_writes_go_in_pieces(self) -> None:
        # Past one request line's 1 MiB: bytes and text alike, through the handle and the client.
        # It reads once it said so: a write finds at most 1 MiB queued (the daemon's limit).
        script = (
            "import sys, hashlib; print('reading', flush=True); d = sys.stdin.buffer.read(); "
            "print(len(d), hashlib.sha256(d).hexdigest())"
        )
        blob = os.urandom(3 << 20)
        text = "é" * (700 << 10)
        p = self.client.spawn(self.name(), [PY, "-c", script])
        for chunk in p:
            if b"reading" in chunk:
                break
        p.write(blob)
        self.client.write(p.session, text, if_gen=p.gen)
        p.close_input()
        want = blob + text.encode()
        self.assertEqual(p.read_all(30).split()[-2:], [str(len(want)).encode(), hashlib.sha256(want).hexdigest().encode()])

    def test_resize_is_seen_by_stty_in_a_pty(self) -> None:
        p = self.client.spawn(self.name(), ["sh", "-c", "stty size; read x; stty size"], pty=(24, 80))
        seen = b""
        events = p.events(10)
        for ev in events:
            if isinstance(ev, Output):
                seen += ev.data
                if b"24 80" in seen:
                    break
        p.resize(40, 132)
        p.write("\n")
        for ev in events:
            if isinstance(ev, Output):
                seen += ev.data
        self.assertIn(b"24 80", seen)
        self.assertIn(b"40 132", seen)
        self.assertEqual((p.rows, p.cols), (40, 132))
        self.assertEqual(p.exit.code, 0)

    def test_an_attached_terminal_that_goes_gives_back_the_size_before_it(self) -> None:
        script = "trap 'stty size' WINCH; echo ready; while :; do sleep 0.05; done"
        p = self.client.spawn(self.name(), ["sh", "-c", script], pty=(24, 80))
        events = p.events(10)
        seen = b""

        def until(text: bytes) -> None:
            nonlocal seen
            seen = b""
            for ev in events:
                if isinstance(ev, Output):
                    seen += ev.data
                    if text in seen:
                        return
            self.fail(f"never saw {text!r}: {seen!r}")

        until(b"ready")
        p.resize(20, 90, attached=True)
        until(b"20 90")
        other = genward.Client(self.daemon.socket)
        other.request("resize", session=p.session, if_gen=p.gen, rows=30, cols=100, attached=True)
        until(b"30 100")
        other.close()
        until(b"20 90")
        p.stop("100ms")

    def test_kill_with_a_signal(self) -> None:
        p = self.client.spawn(self.name(), ["sleep", "30"])
        p.kill("KILL")
        end = p.wait(10)
        self.assertEqual((end.code, end.signal, end.cause), (137, "SIGKILL", "signaled"))

    def test_stop_and_wait(self) -> None:
        p = self.client.spawn(self.name(), ["sleep", "30"])
        p.stop(grace="2s")
        end = p.wait(10)
        self.assertEqual((end.code, end.signal, end.cause), (143, "SIGTERM", "stopped"))
        # Waiting again, and asking the daemon, give the same end.
        self.assertEqual(p.wait(1), end)
        self.assertEqual(self.client.wait(p.session, p.gen, timeout=5), end)

    def test_wait_times_out(self) -> None:
        p = self.client.spawn(self.name(), ["sleep", "30"], grace=100)
        with self.assertRaises(TimeoutError):
            p.wait(0.2)
        p.stop()
        p.wait(10)

    def test_a_handle_of_a_removed_session_raises_no_such_session(self) -> None:
        p = self.client.spawn(self.name(), ["sleep", "1000"])
        self.client.remove(self.name())
        self.assertEqual(p.wait(10).cause, "stopped")
        deadline = time.monotonic() + 10
        while True:
            try:
                self.client.get(self.name())
            except genward.NoSuchSession:
                break
            self.assertLess(time.monotonic(), deadline, "the session is still there")
            time.sleep(0.05)
        for call in (lambda: p.write("x"), p.kill, p.stop, p.close_input):
            with self.assertRaises(genward.NoSuchSession):
                call()

    def test_attach_to_a_generation_another_client_started(self) -> None:
        name = self.name()
        started = self.client.spawn(name, ["sh", "-c", "echo ready; cat"])
        with genward.Client(self.daemon.socket) as other:
            p = other.attach(name)
            self.assertEqual((p.gen, p.pid), (started.gen, started.pid))
            p.write("via attach\n")
            p.close_input()
            self.assertEqual(p.read_all(10), b"ready\nvia attach\n")
            self.assertEqual(p.wait(10).code, 0)
            with self.assertRaises(genward.NotRunning):
                other.attach(name)
            with self.assertRaises(genward.StaleGeneration):
                p.write("x")

    def test_stale_handle_is_refused_after_replacement(self) -> None:
        name = self.name()
        old = self.client.spawn(name, ["sleep", "30"], grace="200ms")
        new = self.client.spawn(name, ["cat"])  # replaces it (on_busy: replace)
        self.assertGreater(new.gen, old.gen)
        for call in (lambda: old.write("x\n"), lambda: old.kill("INT"), lambda: old.stop(),
                     lambda: old.close_input()):
            with self.assertRaises(genward.StaleGeneration):
                call()
        # The old generation's end is its own, and says it was superseded.
        end = old.wait(10)
        self.assertEqual((end.gen, end.cause), (old.gen, "superseded"))
        # The successor is untouched and still takes input.
        self.assertIsNone(new.exit)
        self.assertEqual(self.client.get(name).current, new.gen)
        new.write("still here\n")
        new.close_input()
        self.assertEqual(new.read_all(10), b"still here\n")
        self.assertEqual(new.exit.cause, "exited")


class TestReplayAndTypes(DaemonCase):
    def test_replay_from_start_tail_and_pos(self) -> None:
        name = self.name()
        p = self.client.spawn(name, ["sh", "-c", "for i in 1 2 3 4 5; do echo line$i; done"])
        p.wait(10)
        whole = b"line1\nline2\nline3\nline4\nline5\n"
        with self.client.subscribe(name, from_start=True) as sub:
            evs = sub.until_exit(p.gen, timeout=10)
        out = [e for e in evs if isinstance(e, Output)]
        self.assertEqual(b"".join(e.data for e in out), whole)
        self.assertIn(genward.Spawned(name, p.gen, p.pid), evs)
        self.assertIsInstance(evs[-1], Exit)
        start = out[0].pos
        with self.client.subscribe(name, from_pos=start + 12) as sub:
            got = b"".join(e.data for e in sub.until_exit(p.gen, timeout=10) if isinstance(e, Output))
        self.assertEqual(got, whole[12:])
        with self.client.subscribe(name, tail=6) as sub:
            got = b"".join(e.data for e in sub.until_exit(p.gen, timeout=10) if isinstance(e, Output))
        self.assertTrue(whole.endswith(got) and len(got) >= 6, got)

    def test_subscription_follows_later_generations(self) -> None:
        name = self.name()
        first = self.client.spawn(name, ["true"])
        first.wait(10)
        with self.client.subscribe(name) as sub:
            second = self.client.spawn(name, ["sh", "-c", "echo second"])
            evs = sub.until_exit(second.gen, timeout=10)
        self.assertEqual(b"".join(e.data for e in evs if isinstance(e, Output)), b"second\n")
        self.assertTrue(all(getattr(e, "gen", second.gen) == second.gen for e in evs))

    def test_dropped_is_surfaced(self) -> None:
        name = self.name()
        # A small replay log and a reader that takes nothing for a while: the daemon's
        # queue for it fills, the log moves past it, and it is told what it missed.
        p = self.client.spawn(name, [PY, "-c", "import sys\nfor i in range(4096): sys.stdout.write('x' * 4095 + '\\n')\nsys.stdout.flush()\nimport time; time.sleep(1)"], buffer=65536)
        with self.client.subscribe(name, from_gen=p.gen, buffer=1) as sub:
            time.sleep(1.5)
            evs = sub.until_exit(p.gen, timeout=30)
        drops = [e for e in evs if isinstance(e, Dropped)]
        self.assertTrue(drops, "no dropped event")
        got = sum(len(e.data) for e in evs if isinstance(e, Output))
        self.assertEqual(got + sum(d.missed for d in drops), 4096 * 4096)

    def test_closing_the_client_ends_its_subscriptions_handles_and_waits(self) -> None:
        name = self.name()
        client = genward.Client(self.daemon.socket)
        self.addCleanup(client.close)
        p = client.spawn(name, ["sh", "-c", "echo up; exec sleep 60"])
        self.addCleanup(self.client.stop, name)
        looped = client.subscribe(name, from_gen=p.gen)
        waited = client.subscribe(name, from_gen=p.gen)
        # Both live: each has had an event of the generation.
        self.assertEqual(next(iter(looped.events(10))).gen, p.gen)
        self.assertEqual(next(iter(waited.events(10))).gen, p.gen)
        # Everyone waits on something of the client that never comes by itself (the
        # process sleeps on); the timeouts only bound how long a regression hangs.
        waits = {
            "subscription loop": lambda: list(looped.events(30)),
            "subscription until_exit": lambda: waited.until_exit(p.gen, timeout=30),
            "handle loop": lambda: list(p.events(30)),
            "handle wait": lambda: p.wait(30),
        }
        outcome: Dict[str, str] = {}

        def run(what: str) -> None:
            try:
                waits[what]()
                outcome[what] = "ended quietly"
            except genward.ConnectionLost:
                outcome[what] = "ConnectionLost"
            except BaseException as e:  # a TimeoutError: it was never ended
                outcome[what] = repr(e)

        threads = [threading.Thread(target=run, args=(w,)) for w in waits]
        for t in threads:
            t.start()
        client.close()
        for t in threads:
            t.join(60)
        self.assertEqual(outcome, {w: "ConnectionLost" for w in waits})
        # A subscription made after the close is refused at once.
        with self.assertRaises(genward.ConnectionLost):
            client.subscribe(name)
        # One closed by its own reader ends quietly (after what had arrived).
        own = self.client.subscribe(name, from_gen=p.gen)
        own.close()
        self.assertTrue(all(ev.gen == p.gen for ev in own.events(10)))

    def test_list_and_get_are_typed_and_survive_a_failed_worker(self) -> None:
        ok = self.client.spawn(self.name() + "-ok", ["sleep", "30"], grace=100)
        with self.assertRaises(genward.SpawnFailed):
            self.client.spawn(self.name() + "-bad", ["genward-no-such-program-xyz"])
        crash = self.client.spawn(self.name() + "-crash", ["sh", "-c", "exit 2"])
        crash.wait(10)
        sessions = {s.name: s for s in self.client.list()}
        self.assertEqual(sessions[ok.session].state, "running")
        self.assertEqual(sessions[ok.session].generations[0].gen, ok.gen)
        self.assertEqual(sessions[ok.session].generations[0].pid, ok.pid)
        self.assertTrue(sessions[self.name() + "-bad"].failed)
        bad_end = sessions[self.name() + "-bad"].last_end
        self.assertEqual(bad_end.cause, "spawn_failed")
        self.assertIsInstance(bad_end.error, genward.SpawnFailure)
        self.assertEqual((bad_end.error.session, bad_end.error.kind), (self.name() + "-bad", "not_found"))
        self.assertEqual(self.client.get(self.name() + "-bad").recent_ends[-1].error, bad_end.error)
        self.assertIsNone(sessions[ok.session].last_end)
        self.assertTrue(sessions[crash.session].failed)
        self.assertEqual(sessions[crash.session].last_end, genward.End(crash.gen, 2, None, "exited"))
        got = self.client.get(crash.session)
        self.assertEqual(got.spec["argv"], ["sh", "-c", "exit 2"])
        self.assertEqual(got.recent_ends[-1].gen, crash.gen)
        ok.stop()
        ok.wait(10)


class TestReconnect(unittest.TestCase):
    """A daemon crash and restart on the same state directory: the sessions survive (the
    keeper holds their I/O) and the client picks up where it was."""

    def setUp(self) -> None:
        self.daemon = Daemon().start()
        self.addCleanup(self.daemon.close)

    def test_resumes_handles_and_subscriptions_across_a_restart(self) -> None:
        client = genward.Client(self.daemon.socket, reconnect_timeout=20)
        self.addCleanup(client.close)
        # Echoes its input, numbered, so a gap or a repeat would show.
        p = client.spawn("echoer", [PY, "-u", "-c", "import sys\nfor i, l in enumerate(sys.stdin): print(i, l.strip())"])
        dropped: List[Dropped] = []
        p.on_dropped(dropped.append)
        sub = client.subscribe("echoer", from_gen=p.gen)
        self.addCleanup(sub.close)
        p.write("a\n")
        self.assertEqual(self._next_output(p, want=b"0 a\n"), b"0 a\n")
        old_pid = client.server.pid
        self.daemon.kill()
        self.daemon.start()
        # A request made while the client reconnects waits for the new connection.
        p.write("b\n")
        p.write("c\n")
        self.assertEqual(self._next_output(p, want=b"1 b\n2 c\n"), b"1 b\n2 c\n")
        self.assertGreaterEqual(client.reconnects, 1)
        self.assertNotEqual(client.server.pid, old_pid)
        self.assertEqual(client.get("echoer").current, p.gen)
        p.close_input()
        end = p.wait(10)
        self.assertEqual((end.gen, end.code), (p.gen, 0))
        self.assertEqual(dropped, [])
        got = b"".join(e.data for e in sub.until_exit(p.gen, timeout=10) if isinstance(e, Output))
        self.assertEqual(got, b"0 a\n1 b\n2 c\n")

    def test_a_subscription_delivers_nothing_twice_across_a_restart(self) -> None:
        # The last thing the subscription delivered before the crash is an event (the first
        # generation's end), after its last byte: resumed from the position after that
        # byte, the daemon sends the event again, and it must not be delivered again.
        client = genward.Client(self.daemon.socket, reconnect_timeout=20)
        self.addCleanup(client.close)
        first = client.spawn("replayed", ["sh", "-c", "echo before"])
        first.wait(10)
        sub = client.subscribe("replayed", from_start=True)
        self.addCleanup(sub.close)
        events = sub.until_exit(first.gen, timeout=10)
        self.daemon.kill()
        self.daemon.start()
        second = client.spawn("replayed", ["sh", "-c", "echo after"])
        events += sub.until_exit(second.gen, timeout=10)
        text = b"".join(e.data for e in events if isinstance(e, Output))
        self.assertEqual(text, b"before\nafter\n")

        def count(kind: type, gen: int) -> int:
            return sum(1 for e in events if isinstance(e, kind) and e.gen == gen)

        self.assertEqual(
            [count(genward.Spawned, first.gen), count(Exit, first.gen), count(genward.Spawned, second.gen)],
            [1, 1, 1],
        )

    def test_a_wait_pending_across_a_restart_is_answered(self) -> None:
        client = genward.Client(self.daemon.socket, reconnect_timeout=20)
        self.addCleanup(client.close)
        p = client.spawn("waited", ["sh", "-c", "read x; echo bye $x; exit 7"])
        got: List[bytes] = []
        p.on_data(got.append)
        ends: List[Exit] = []
        waiter = threading.Thread(target=lambda: ends.append(p.wait(30)))
        waiter.start()
        time.sleep(0.2)
        self.daemon.kill()
        self.daemon.start()
        p.write("now\n")
        waiter.join(30)
        self.assertEqual([(e.gen, e.code) for e in ends], [(p.gen, 7)])
        self.assertEqual(b"".join(got), b"bye now\n")

    def test_a_request_given_up_while_away_is_never_sent(self) -> None:
        client = genward.Client(self.daemon.socket, timeout=0.5, reconnect_timeout=20)
        self.addCleanup(client.close)
        p = client.spawn("given-up", ["cat"])
        self.daemon.kill()
        with self.assertRaises(TimeoutError):
            p.write("too late\n")
        self.daemon.start()
        client.timeout = 10
        p.write("in time\n")
        p.close_input()
        self.assertEqual(p.read_all(10), b"in time\n")

    def test_an_upgrade_in_place_keeps_everything(self) -> None:
        client = genward.Client(self.daemon.socket)
        self.addCleanup(client.close)
        p = client.spawn("up", [PY, "-u", "-c", "import sys\nfor l in sys.stdin: print('got', l.strip())"])
        p.write("1\n")
        answer = client.upgrade()
        self.assertEqual(answer["pid"], client.server.pid)
        p.write("2\n")
        p.close_input()
        self.assertEqual(p.read_all(10), b"got 1\ngot 2\n")
        self.assertEqual((p.wait(10).code, client.reconnects), (0, 0))

    def test_a_gap_while_away_is_reported_as_dropped(self) -> None:
        for seen_before in (True, False):
            with self.subTest(output_seen_before_the_crash=seen_before):
                self._gap(seen_before)

    def _gap(self, seen_before: bool) -> None:
        client = genward.Client(self.daemon.socket, reconnect_timeout=20)
        self.addCleanup(client.close)
        # 20 bursts of 16 KiB written while the client is away; the session keeps 64 KiB,
        # so most of it is gone by the time the client is back.
        burst, bursts = 16384, 20
        total = burst * bursts + (6 if seen_before else 0)
        first = "echo ready; " if seen_before else ""
        script = f"{first}read go; for i in $(seq {bursts}); do head -c {burst} /dev/zero; sleep 0.02; done; read y"
        name = f"gap-{seen_before}"
        p = client.spawn(name, ["sh", "-c", script], buffer=65536)
        dropped: List[Dropped] = []
        p.on_dropped(dropped.append)
        n = [0]
        p.on_data(lambda b: n.__setitem__(0, n[0] + len(b)))
        if seen_before:
            deadline = time.monotonic() + 10
            while n[0] < 6:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.01)
        self.daemon.kill()
        # The next daemon listens elsewhere until the process has written everything, so
        # the client cannot come back sooner.
        hidden = os.path.join(self.daemon.state_dir, "hidden.sock")
        self.daemon.start(socket=hidden)
        with genward.Client(hidden) as other:
            other.write(name, "go\n")
            deadline = time.monotonic() + 20
            while other.get(name).generations[0].offsets.get("stdout", 0) < total:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.05)
        os.rename(hidden, self.daemon.socket)
        deadline = time.monotonic() + 20
        while n[0] + sum(d.missed for d in dropped) < total and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(dropped, f"the gap was not reported; got {n[0]} bytes")
        self.assertEqual(n[0] + sum(d.missed for d in dropped), total)
        self.assertLessEqual(n[0], 65536 + burst + 6)
        p.write("done\n")
        self.assertEqual(p.wait(10).code, 0)
        client.close()

    def test_a_handle_whose_session_was_removed_while_away_raises_no_such_session(self) -> None:
        client = genward.Client(self.daemon.socket, reconnect_timeout=20)
        self.addCleanup(client.close)
        p = client.spawn("removed-away", ["sleep", "1000"])
        exits: List[Exit] = []
        p.on_exit(exits.append)
        looped: List[BaseException] = []

        def loop() -> None:
            try:
                for _ in p:
                    pass
            except BaseException as e:
                looped.append(e)

        loop_thread = threading.Thread(target=loop)
        loop_thread.start()
        self.daemon.kill()
        # Back where the client does not look yet: another client removes the session
        # there, and no event of it reaches this client.
        hidden = os.path.join(self.daemon.state_dir, "hidden.sock")
        self.daemon.start(socket=hidden)
        with genward.Client(hidden) as other:
            other.remove("removed-away")
            deadline = time.monotonic() + 10
            while True:
                try:
                    other.get("removed-away")
                except genward.NoSuchSession:
                    break
                self.assertLess(time.monotonic(), deadline, "the session is still there")
                time.sleep(0.05)
        os.rename(hidden, self.daemon.socket)
        with self.assertRaises(genward.NoSuchSession):
            p.wait(10)
        loop_thread.join(10)
        self.assertEqual([type(e) for e in looped], [genward.NoSuchSession])
        self.assertEqual(exits, [])
        with self.assertRaises(genward.NoSuchSession):
            p.write("x")

    def _next_output(self, p: genward.Process, want: bytes = b"") -> bytes:
        got = b""
        for ev in p.events(20):
            if isinstance(ev, Output):
                got += ev.data
                if not want or len(got) >= len(want):
                    return got
        return got


if __name__ == "__main__":
    unittest.main()


class TestReadiness(DaemonCase):
    def test_ready_depends_on_and_wait_ready(self) -> None:
        flag = os.path.join(self.daemon.dir, "db-ready")
        self.client.spawn(
            "db",
            ["sleep", "30"],
            grace="100ms",
            ready={"command": ["test", "-e", flag], "interval": "20ms"},
            live={"command": ["true"], "interval": 5000},
        )
        spec = self.client.get("db").spec or {}
        self.assertEqual(spec["ready"], {"command": ["test", "-e", flag], "interval": 20})
        self.assertEqual(spec["live"], {"command": ["true"], "interval": 5000})
        # The spawn request itself is answered at once; web then waits for db.
        args = genward._wire.spawn_args("web", ["sleep", "30"], {"grace": "100ms", "depends_on": {"db": "ready"}})
        web = self.client._call(args)["gen"]
        self.assertEqual(self.client.get("web").waiting, "waiting for db to be ready")
        with open(flag, "w"):
            pass
        self.assertEqual(self.client.wait_ready("db")["event"], "ready")
        # Without a check of its own, web is ready once it runs: after db was.
        self.assertEqual(self.client.wait_ready("web", web)["event"], "ready")
        self.assertIsNone(self.client.get("web").waiting)

    def test_wait_ready_raises_with_the_reason(self) -> None:
        self.client.spawn("late", ["sleep", "30"], grace="100ms", ready={"output": "never", "timeout": "50ms"})
        with self.assertRaises(genward.NotReady) as caught:
            self.client.wait_ready("late")
        self.assertEqual(caught.exception.event["event"], "ready_failed")
        self.assertIn("timed out after 50ms", str(caught.exception))

    def test_wait_ready_of_one_that_ends_first_raises_with_its_end(self) -> None:
        # A child ignoring TERM holds the output, so the exit is not reported until the
        # stop below: the wait comes after the end and before its report.
        script = "(trap '' TERM; exec sleep 1000) & exit 4"
        p = self.client.spawn("early", ["sh", "-c", script], kill_grace="1h", drain="1h", ready={"output": "never"})
        for ev in p.events(10):
            if isinstance(ev, genward.ReadyFailed):
                self.assertEqual(ev.reason, "exited before it was ready")
                break
        got: Dict[str, BaseException] = {}

        def wait() -> None:
            try:
                with genward.Client(self.daemon.socket) as waiting:
                    waiting.wait_ready("early", p.gen, timeout=20)
            except BaseException as e:  # noqa: B036 - handed to the test's thread
                got["error"] = e

        waiter = threading.Thread(target=wait)
        waiter.start()
        self.client.stop("early", grace=0)
        waiter.join(30)
        error = got.get("error")
        assert isinstance(error, genward.NotReady), repr(error)
        self.assertEqual(error.event["event"], "exited")
        self.assertEqual(error.event["code"], 4)
        self.assertIn("ended before it was ready", str(error))
