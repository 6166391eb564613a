"""The asyncio AsyncClient against a real daemon: the same behaviours as the sync client."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import tempfile
import time
import unittest
from typing import Any, Callable, Dict, List, Tuple
from unittest import mock

import genward
from genward import Dropped, Exit, Output, aio

from .daemon import Daemon, DaemonPerClass
from .test_sync import FLOOD, FLOOD_SCRIPT, PY, READS_ONCE_LET_GO, flood_digest, let_go_on_full_queue


class AsyncDaemonCase(DaemonPerClass, unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.client = await genward.AsyncClient.connect(self.daemon.socket)

    async def asyncTearDown(self) -> None:
        await self.client.close()

    def name(self) -> str:
        return "a-" + self.id().rsplit(".", 1)[-1].replace("test_", "")[:60]


class TestAsyncClient(AsyncDaemonCase):
    async def test_hello_and_default_socket(self) -> None:
        self.assertEqual(self.client.server.protocol, genward.PROTOCOL)
        old = os.environ.get("GENWARD_SOCKET")
        os.environ["GENWARD_SOCKET"] = self.daemon.socket
        try:
            async with await genward.AsyncClient.connect() as c:
                self.assertEqual(c.server.pid, self.client.server.pid)
        finally:
            if old is None:
                del os.environ["GENWARD_SOCKET"]
            else:
                os.environ["GENWARD_SOCKET"] = old

    async def test_async_with_a_constructed_client_connects(self) -> None:
        # `async with AsyncClient(path) as c:` works as `with Client(path) as c:` does.
        async with genward.AsyncClient(self.daemon.socket, timeout=5) as c:
            self.assertEqual(c.server.pid, self.client.server.pid)
            self.assertIsInstance(await c.list(), list)
        self.assertTrue(c.closed)
        with self.assertRaises(genward.NoDaemon):
            async with genward.AsyncClient(self.daemon.socket + ".none"):
                pass

    async def test_connect_takes_the_constructors_options(self) -> None:
        import inspect

        for cls in (genward.Client, genward.AsyncClient):
            init = list(inspect.signature(cls.__init__).parameters.values())[1:]
            self.assertEqual(list(inspect.signature(cls.connect).parameters.values()), init, cls)

    async def test_spawn_ok_and_failure(self) -> None:
        p = await self.client.spawn(self.name(), ["sh", "-c", "echo hi; exit 5"])
        self.assertIsInstance(p.pid, int)
        self.assertEqual([c async for c in p], [b"hi\n"])
        end = await p.wait(10)
        self.assertEqual((end.code, end.cause), (5, "exited"))
        with self.assertRaises(genward.SpawnFailed) as cm:
            await self.client.spawn(self.name() + "-bad", ["genward-no-such-program-xyz"])
        self.assertEqual(cm.exception.kind, "not_found")

    async def test_run_as_options_reach_the_daemon(self) -> None:
        script = 'echo "m=$(umask) n=$(ulimit -Sn) h=$(ulimit -Hn)"'
        limits: Dict[str, genward.RlimitValue] = {"nofile": genward.Rlimit(100, 200)}
        p = await self.client.spawn(self.name(), ["sh", "-c", script], umask=0o022, rlimits=limits)
        self.assertEqual((await p.read_all(10)).decode().strip(), "m=0022 n=100 h=200")
        with self.assertRaises(genward.SpawnFailed) as cm:
            await self.client.spawn(self.name() + "-who", ["true"], group="genward-no-such-group")
        self.assertIn("group: no group named", cm.exception.message)

    async def test_output_byte_exact(self) -> None:
        data = bytes(range(256)) * 2 + b"\xff\xfe\x80\n\x00"
        p = await self.client.spawn(self.name(), [PY, "-c", f"import sys; sys.stdout.buffer.write({data!r})"])
        self.assertEqual(await p.read_all(10), data)

    async def test_flood_64mib(self) -> None:
        h = hashlib.sha256()
        n = 0
        drops: List[Dropped] = []
        p = await self.client.spawn(self.name(), [PY, "-c", FLOOD_SCRIPT], lossless=True)
        p.on_dropped(drops.append)
        async for chunk in p:
            h.update(chunk)
            n += len(chunk)
        self.assertEqual((n, drops), (FLOOD, []))
        self.assertEqual(h.hexdigest(), flood_digest())

    async def test_a_slow_iterator_loses_nothing_when_lossless(self) -> None:
        total = 8 << 20
        script = f"import sys\nsys.stdout.buffer.write(b'y' * {total}); sys.stdout.flush()\nsys.stdin.readline()"
        p = await self.client.spawn(self.name(), [PY, "-c", script], lossless=True, keep=256 << 10)
        n = 0
        wrote = False
        async for ev in p.events(30):
            self.assertNotIsInstance(ev, Dropped)
            if isinstance(ev, Output):
                n += len(ev.data)
                await asyncio.sleep(0.002)
                if not wrote and n > (1 << 20):
                    await p.write("done\n")
                    wrote = True
        self.assertEqual((n, p.exit.code), (total, 0))

    async def test_a_slow_coroutine_data_callback_holds_the_output_back_within_keep(self) -> None:
        # Each chunk's coroutine waits: the tasks holding the output must not pile up
        # without bound; the reader holds back once `keep` bytes wait in them.
        keep, total = 256 << 10, 16 << 20
        name = self.name()
        script = f"import sys\nsys.stdin.readline()\nsys.stdout.buffer.write(b'c' * {total})"
        p = await self.client.spawn(name, [PY, "-c", script], lossless=True, keep=keep)
        client = self.client
        bound = keep + (2 << 20) + 4096
        release = asyncio.Event()
        settled = asyncio.Event()
        was_read: List[int] = []
        got = [0]

        def read() -> int:
            return client._follows[name].next_pos or 0

        async def on_data(data: bytes) -> None:
            # Runs between the reader's reads (and while it holds back).
            if not settled.is_set() and (client._must_hold_back() or read() > bound):
                was_read.append(read())
                settled.set()
            await release.wait()
            got[0] += len(data)

        p.on_data(on_data)
        await p.write("go\n")
        await asyncio.wait_for(settled.wait(), 60)
        release.set()
        self.assertLessEqual(was_read[0], bound)
        self.assertEqual((await p.wait(60)).code, 0)
        # Every chunk's task has run.
        while p._st.data_tasks:
            await asyncio.gather(*list(p._st.data_tasks))
        self.assertEqual(got[0], total)

    async def test_output_discarded_before_the_first_listener_is_reported_as_dropped(self) -> None:
        keep, total = 64 << 10, 8 << 20
        for dropped_first in (True, False):
            with self.subTest(on_dropped_added_first=dropped_first):
                p = await self.client.spawn(f"a-held-{dropped_first}", [PY, "-c", f"import sys; sys.stdout.buffer.write(b'd' * {total})"], keep=keep)
                await p.wait(30)
                got: List[bytes] = []
                dropped: List[Dropped] = []
                if dropped_first:
                    p.on_dropped(dropped.append)
                    p.on_data(got.append)
                else:
                    p.on_data(got.append)
                    p.on_dropped(dropped.append)
                n = sum(map(len, got))
                self.assertTrue(dropped, f"the gap was not reported; got {n} bytes")
                self.assertEqual(n + sum(d.missed for d in dropped), total)
                self.assertEqual(dropped[-1].end, total - n, "the gap ends where the output heard begins")

    async def test_a_request_past_the_line_limit_is_refused_at_once(self) -> None:
        with self.assertRaises(genward.Limit):
            await self.client.spawn(self.name(), ["true"], env={"BIG": "x" * (1 << 20)})
        p = await self.client.spawn(self.name(), ["true"])
        self.assertEqual((await p.wait(10)).cause, "exited")

    async def test_long_writes_go_in_pieces(self) -> None:
        # It reads once it said so: a write finds at most 1 MiB queued (the daemon's limit).
        script = (
            "import sys, hashlib; print('reading', flush=True); d = sys.stdin.buffer.read(); "
            "print(len(d), hashlib.sha256(d).hexdigest())"
        )
        blob = os.urandom(3 << 20)
        p = await self.client.spawn(self.name(), [PY, "-c", script])
        async for chunk in p:
            if b"reading" in chunk:
                break
        await p.write(blob)
        await self.client.write(p.session, "é" * (700 << 10), if_gen=p.gen)
        await p.close_input()
        want = blob + ("é" * (700 << 10)).encode()
        out = (await p.read_all(30)).split()[-2:]
        self.assertEqual(out, [str(len(want)).encode(), hashlib.sha256(want).hexdigest().encode()])

    async def test_a_write_waits_for_room_in_the_daemons_input_queue(self) -> None:
        # See the sync twin: the process reads once a piece found no room.
        go = os.path.join(self.daemon.dir, self.name() + ".go")
        got = os.path.join(self.daemon.dir, self.name() + ".got")
        p = await self.client.spawn(self.name(), ["sh", "-c", READS_ONCE_LET_GO, "sh", go, got])
        data = os.urandom(3 << 20)
        with let_go_on_full_queue(go) as full:
            await p.write(data)
        self.assertGreater(full.seen, 0)
        await p.close_input()
        self.assertEqual((await p.wait(30)).code, 0)
        with open(got, "rb") as f:
            self.assertTrue(f.read() == data, "the bytes, in order")

    async def test_a_write_without_room_for_the_clients_timeout_raises_limit(self) -> None:
        client = await genward.AsyncClient.connect(self.daemon.socket, timeout=0.5)
        try:
            p = await client.spawn(self.name(), ["sleep", "1000"])
            with self.assertRaises(genward.Limit) as caught:
                await p.write(os.urandom(3 << 20))
            self.assertIn("already queued", caught.exception.message)
            await p.stop()
            self.assertEqual((await p.wait(10)).cause, "stopped")
        finally:
            await client.close()

    async def test_input_callbacks_and_wait(self) -> None:
        got: List[bytes] = []
        ends: List[Exit] = []
        p = await self.client.spawn(self.name(), ["cat"])
        p.on_data(got.append)
        p.on_exit(ends.append)
        await p.write(b"\x00\xffbin\n")
        await p.write("text\n")
        await p.close_input()
        end = await p.wait(10)
        self.assertEqual(b"".join(got), b"\x00\xffbin\ntext\n")
        self.assertEqual(ends, [end])

    async def test_resize_in_a_pty(self) -> None:
        p = await self.client.spawn(self.name(), ["sh", "-c", "stty size; read x; stty size"], pty=(24, 80))
        seen = b""
        events = p.events(10)
        async for ev in events:
            if isinstance(ev, Output):
                seen += ev.data
                if b"24 80" in seen:
                    break
        await p.resize(50, 100)
        await p.write("\n")
        async for ev in events:
            if isinstance(ev, Output):
                seen += ev.data
        self.assertIn(b"50 100", seen)

    async def test_stop_kill_and_stale_after_replacement(self) -> None:
        name = self.name()
        old = await self.client.spawn(name, ["sleep", "30"], grace="200ms")
        new = await self.client.spawn(name, ["sleep", "30"])
        with self.assertRaises(genward.StaleGeneration):
            await old.write("x")
        with self.assertRaises(genward.StaleGeneration):
            await old.kill("KILL")
        self.assertEqual((await old.wait(10)).cause, "superseded")
        self.assertIsNone(new.exit)
        await new.stop()
        end = await new.wait(10)
        self.assertEqual((end.gen, end.code, end.cause), (new.gen, 143, "stopped"))
        k = await self.client.spawn(name, ["sleep", "30"])
        await k.kill("KILL")
        self.assertEqual((await k.wait(10)).signal, "SIGKILL")

    async def test_replay_and_list(self) -> None:
        name = self.name()
        p = await self.client.spawn(name, ["sh", "-c", "echo one; echo two; exit 1"])
        await p.wait(10)
        async with await self.client.subscribe(name, from_start=True) as sub:
            evs = await sub.until_exit(p.gen, timeout=10)
        self.assertEqual(b"".join(e.data for e in evs if isinstance(e, Output)), b"one\ntwo\n")
        async with await self.client.subscribe(name, tail=4) as sub:
            evs = await sub.until_exit(p.gen, timeout=10)
        self.assertTrue(b"one\ntwo\n".endswith(b"".join(e.data for e in evs if isinstance(e, Output))))
        sessions = {s.name: s for s in await self.client.list()}
        self.assertTrue(sessions[name].failed)
        self.assertEqual((await self.client.get(name)).last_end.code, 1)
        self.assertEqual((await self.client.wait(name, p.gen)).gen, p.gen)


    async def test_closing_the_client_ends_its_subscriptions_handles_and_waits(self) -> None:
        name = self.name()
        client = await genward.AsyncClient.connect(self.daemon.socket)
        p = await client.spawn(name, ["sh", "-c", "echo up; exec sleep 60"])
        try:
            looped = await client.subscribe(name, from_gen=p.gen)
            waited = await client.subscribe(name, from_gen=p.gen)
            self.assertEqual((await looped.events(10).__anext__()).gen, p.gen)
            self.assertEqual((await waited.events(10).__anext__()).gen, p.gen)

            async def drain(it: Any) -> None:
                async for _ in it:
                    pass

            # The timeouts only bound how long a regression hangs.
            waits = {
                "subscription loop": drain(looped.events(30)),
                "subscription until_exit": waited.until_exit(p.gen, timeout=30),
                "handle loop": drain(p.events(30)),
                "handle wait": p.wait(30),
            }
            tasks = {w: asyncio.ensure_future(c) for w, c in waits.items()}
            await asyncio.sleep(0)  # a turn of the loop: each starts, and waits
            await client.close()
            outcome: Dict[str, str] = {}
            for w, t in tasks.items():
                try:
                    await t
                    outcome[w] = "ended quietly"
                except genward.ConnectionLost:
                    outcome[w] = "ConnectionLost"
                except BaseException as e:  # a TimeoutError: it was never ended
                    outcome[w] = repr(e)
            self.assertEqual(outcome, {w: "ConnectionLost" for w in waits})
            with self.assertRaises(genward.ConnectionLost):
                await client.subscribe(name)
        finally:
            await client.close()
            await self.client.stop(name)


class TestAsyncReconnect(unittest.IsolatedAsyncioTestCase):
    def setUp(self) -> None:
        self.daemon = Daemon().start()
        self.addCleanup(self.daemon.close)

    async def test_resumes_across_a_restart(self) -> None:
        client = await genward.AsyncClient.connect(self.daemon.socket, reconnect_timeout=20)
        try:
            p = await client.spawn("echoer", [PY, "-u", "-c", "import sys\nfor i, l in enumerate(sys.stdin): print(i, l.strip())"])
            drops: List[Dropped] = []
            p.on_dropped(drops.append)
            events = p.events(20)
            await p.write("a\n")
            self.assertEqual(await _collect(events, b"0 a\n"), b"0 a\n")
            await asyncio.get_running_loop().run_in_executor(None, self._restart)
            await p.write("b\n")
            self.assertEqual(await _collect(events, b"1 b\n"), b"1 b\n")
            self.assertGreaterEqual(client.reconnects, 1)
            await p.close_input()
            self.assertEqual((await p.wait(10)).code, 0)
            self.assertEqual(drops, [])
        finally:
            await client.close()

    async def test_a_subscription_delivers_nothing_twice_across_a_restart(self) -> None:
        # As with the sync client: the first generation's end, delivered after its last
        # byte, comes again from the daemon once resumed, and is not delivered twice.
        client = await genward.AsyncClient.connect(self.daemon.socket, reconnect_timeout=20)
        try:
            first = await client.spawn("replayed", ["sh", "-c", "echo before"])
            await first.wait(10)
            async with await client.subscribe("replayed", from_start=True) as sub:
                events = await sub.until_exit(first.gen, timeout=10)
                await asyncio.get_running_loop().run_in_executor(None, self._restart)
                second = await client.spawn("replayed", ["sh", "-c", "echo after"])
                events += await sub.until_exit(second.gen, timeout=10)
            text = b"".join(e.data for e in events if isinstance(e, Output))
            self.assertEqual(text, b"before\nafter\n")

            def count(kind: type, gen: int) -> int:
                return sum(1 for e in events if isinstance(e, kind) and e.gen == gen)

            self.assertEqual(
                [count(genward.Spawned, first.gen), count(Exit, first.gen), count(genward.Spawned, second.gen)],
                [1, 1, 1],
            )
        finally:
            await client.close()

    def _restart(self) -> None:
        self.daemon.kill()
        time.sleep(0.2)
        self.daemon.start()

    async def test_a_request_written_into_a_connection_already_gone_goes_on_the_next(self) -> None:
        # The write fails at once: nothing of it reached the daemon.
        await self._written_while_gone(lambda client: None)

    async def test_a_request_written_into_a_transport_that_failed_goes_on_the_next(self) -> None:
        # The transport found the end first (as a failed read or write leaves it: closing,
        # its loss not yet delivered to the client's reader): it takes nothing more.
        await self._written_while_gone(lambda client: client._writer.transport.abort())

    async def test_requests_written_into_a_new_connection_already_gone_go_on_the_next(self) -> None:
        # The first connection after the loss is to a daemon gone before it accepted it:
        # what waited for it is written there, fails at once, and waits for the next one.
        await self._written_while_gone(lambda client: None, first_reconnection_gone=True)

    async def test_closed_as_a_reconnection_connects_it_reads_no_more(self) -> None:
        # Closed from inside the reconnection here; from outside, what `close` cancels can
        # be lost that way (before Python 3.12, when the connection is made in the same turn).
        client = await genward.AsyncClient.connect(self.daemon.socket, reconnect_timeout=20)
        real_open = aio._open

        async def open_and_close(path: str, timeout: Any) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            conn = await real_open(path, timeout)
            await client.close()
            return conn

        reader = client._task
        assert reader is not None
        with mock.patch.object(aio, "_open", open_and_close):
            client._writer.transport.abort()  # the connection lost: the client reconnects
            # Bounded only so that a reader going on reading fails the test, not hangs it.
            done, _ = await asyncio.wait({reader}, timeout=20)
        self.assertEqual(done, {reader})
        self.assertIsNone(client._writer)

    async def _written_while_gone(self, gone: Callable[[Any], None], first_reconnection_gone: bool = False) -> None:
        """The daemon is killed and, before the loop turns again (so before the client can
        read that its connection ended), ``gone`` runs and input is written: a request that
        may not be asked twice. It reaches the process once, through the daemon started
        again, instead of failing as one that may or may not have been done."""
        real_open = aio._open
        starting: "List[asyncio.Future[Any]]" = []

        async def open_again(path: str, timeout: Any) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            if starting:
                return await real_open(path, timeout)
            gone_conn = await _gone_connection(real_open, timeout) if first_reconnection_gone else None
            # Started only now, that socket closed: a child forked while it is open holds it
            # until it runs its program, and the connection queued there lives on till then.
            starting.append(asyncio.get_running_loop().run_in_executor(None, self.daemon.start))
            await asyncio.shield(starting[0])
            return gone_conn or await real_open(path, timeout)

        client = await genward.AsyncClient.connect(self.daemon.socket, reconnect_timeout=20)
        try:
            p = await client.spawn("gone", ["cat"])
            with mock.patch.object(aio, "_open", open_again):
                self.daemon.kill()  # blocks the loop: it does not turn before the write below
                gone(client)
                # Runs straight into its write, with no turn of the loop before it.
                await p.write("once\n")
            await p.close_input()
            self.assertEqual(await p.read_all(20), b"once\n")
            self.assertEqual((await p.wait(10)).code, 0)
            self.assertEqual(client.reconnects, 2 if first_reconnection_gone else 1)
        finally:
            await client.close()
            if starting:
                await starting[0]  # up, whatever became of the client, to be stopped after


async def _gone_connection(
    open_unix: Callable[[str, Any], Any], timeout: Any
) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to a daemon gone before it accepted it: its listening socket is closed
    with the connection still queued, which resets it."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "gone.sock")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as srv:
            srv.bind(path)
            srv.listen(1)
            conn: Tuple[asyncio.StreamReader, asyncio.StreamWriter] = await open_unix(path, timeout)
    return conn


async def _collect(events, want: bytes) -> bytes:  # type: ignore[no-untyped-def]
    got = b""
    async for ev in events:
        if isinstance(ev, Output):
            got += ev.data
            if len(got) >= len(want):
                break
    return got


if __name__ == "__main__":
    unittest.main()
