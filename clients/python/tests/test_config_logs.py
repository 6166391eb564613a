"""``reload`` of a daemon's configuration, the ``log`` spawn option, hello's ``log_writer``,
and the readiness and liveness events of a generation, against real daemons."""

from __future__ import annotations

import json
import os
import time
import unittest
from typing import List

import genward
from genward import Exit, LogFile, Ready, ReadyFailed, ReloadPlan, Unhealthy

from .daemon import Daemon, DaemonPerClass


def _session(argv: List[str]) -> str:
    return json.dumps({"argv": argv, "grace": "100ms"})


class TestReload(unittest.TestCase):
    def setUp(self) -> None:
        self.daemon = Daemon()
        self.addCleanup(self.daemon.close)
        self.conf = os.path.join(self.daemon.dir, "conf.d")

    def write(self, name: str, text: str) -> None:
        with open(os.path.join(self.conf, name), "w") as f:
            f.write(text)

    def test_without_config_raises_no_config(self) -> None:
        self.daemon.start()
        with genward.Client(self.daemon.socket) as c:
            with self.assertRaises(genward.NoConfig) as caught:
                c.reload(dry_run=True)
        self.assertEqual(caught.exception.code, "no_config")
        self.assertIsInstance(caught.exception, genward.DaemonError)

    def test_dry_run_plans_reload_applies_bad_config_raises(self) -> None:
        os.mkdir(self.conf)
        self.write("keep.json", _session(["sleep", "30"]))
        self.write("web.json", _session(["sleep", "30"]))
        self.daemon.start(args=["--config", self.conf])
        with genward.Client(self.daemon.socket) as c:
            web = c.get("web").current
            keep = c.get("keep").current
            self.write("web.json", _session(["sleep", "31"]))
            self.write("db.json", _session(["sleep", "30"]))

            plan = c.reload(dry_run=True)
            self.assertEqual(plan, ReloadPlan(True, ("db",), (), ("web",), (), ("keep",)))
            self.assertEqual(c.get("web").current, web, "a dry run replaces nothing")
            self.assertEqual(sorted(s.name for s in c.list()), ["keep", "web"], "a dry run starts nothing")

            done = c.reload()
            self.assertEqual(done, ReloadPlan(False, ("db",), (), ("web",), (), ("keep",)))
            self.assertEqual(c.get("web").spec["argv"], ["sleep", "31"])
            self.assertNotEqual(c.get("web").current, web)
            self.assertEqual(c.get("keep").current, keep, "an unchanged session keeps its generation")
            self.assertEqual(c.get("db").name, "db")

            os.remove(os.path.join(self.conf, "keep.json"))
            self.assertEqual(c.reload(dry_run=True).stop, ("keep",))

            self.write("db.json", '{"argv": ["sleep", "30"], "grace": nope}')
            with self.assertRaises(genward.BadConfig) as caught:
                c.reload()
            self.assertEqual(caught.exception.code, "bad_config")
            self.assertIn("db.json", caught.exception.message)
            self.assertEqual(c.get("keep").current, keep, "a bad config changes nothing")

    def test_async_reload(self) -> None:
        import asyncio

        os.mkdir(self.conf)
        self.write("one.json", _session(["sleep", "30"]))
        self.daemon.start(args=["--config", self.conf])

        async def run() -> ReloadPlan:
            c = await genward.AsyncClient.connect(self.daemon.socket)
            try:
                return await c.reload(dry_run=True)
            finally:
                await c.close()

        self.assertEqual(asyncio.run(run()), ReloadPlan(True, (), (), (), (), ("one",)))


class TestLogsAndHealth(DaemonPerClass, unittest.TestCase):
    def setUp(self) -> None:
        self.client = genward.Client(self.daemon.socket)
        self.addCleanup(self.client.close)

    def read(self, path: str) -> str:
        try:
            with open(path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def test_log_file_option(self) -> None:
        path = os.path.join(self.daemon.dir, "app.log")
        p = self.client.spawn("logged", ["sh", "-c", "echo hello-log; echo oops >&2"], log=LogFile(path, max_size=4096, keep=2))
        self.assertEqual(self.client.get("logged").spec["log"], {"path": path, "max_size": 4096, "keep": 2})
        p.wait(10)
        # The log writer writes off the daemon's loop: no event says when, so look.
        deadline = time.monotonic() + 10
        while not ("hello-log" in self.read(path) and "oops" in self.read(path)):
            self.assertLess(time.monotonic(), deadline, f"the log file has: {self.read(path)!r}")
            time.sleep(0.02)
        # A mapping as the protocol spells it does as well.
        args = genward._wire.spawn_args("x", ["true"], {"log": {"path": path}})
        self.assertEqual(args["log"], {"path": path})

    def test_hello_log_writer(self) -> None:
        info = self.client.hello()
        self.assertIsNotNone(info.log_writer)
        assert info.log_writer is not None
        self.assertGreaterEqual(info.log_writer.restarts, 0)
        self.assertEqual(info.log_writer.dropped_bytes, 0)

    def test_unhealthy_then_stopped(self) -> None:
        p = self.client.spawn("sick", ["sleep", "30"], grace="100ms",
                              live={"command": ["false"], "interval": "20ms", "failures": 2})
        events = list(p.events(10))
        sick = [e for e in events if isinstance(e, Unhealthy)]
        self.assertEqual(sick, [Unhealthy("sick", p.gen, 2)])
        end = events[-1]
        assert isinstance(end, Exit)
        self.assertEqual(end.cause, "stopped")
        self.assertLess(events.index(sick[0]), len(events) - 1)

    def test_ready_and_ready_failed_events(self) -> None:
        up = self.client.spawn("up", ["sh", "-c", "echo up; exec sleep 30"], grace="100ms", ready={"output": "up"})
        late = self.client.spawn("late", ["sleep", "30"], grace="100ms", ready={"output": "never", "timeout": "50ms"})
        for ev in up.events(10):
            if isinstance(ev, Ready):
                self.assertEqual(ev, Ready("up", up.gen))
                break
        for ev in late.events(10):
            if isinstance(ev, ReadyFailed):
                self.assertEqual(ev.gen, late.gen)
                self.assertIn("timed out after 50ms", ev.reason)
                break
        up.stop()
        late.stop()
        up.wait(10)
        late.wait(10)


if __name__ == "__main__":
    unittest.main()
