"""The wire format without a daemon: frame decoding, request encoding, socket rules."""

from __future__ import annotations

import json
import os
import pathlib
import unittest
from typing import Any, Dict, List
from unittest import mock

import genward
from genward import ProtocolError, types
from genward._wire import Decoder, default_socket_path, encode_request, input_member, run_as_members, spawn_args


def frame(data: bytes, pos: int = 0) -> bytes:
    head = {"event": "output", "session": "s", "gen": 1, "stream": "stdout", "offset": pos, "pos": pos, "len": len(data)}
    return json.dumps(head).encode() + b"\n" + data + b"\n"


class TestDecoder(unittest.TestCase):
    def test_frames_and_lines_split_anywhere(self) -> None:
        payload = b'\n{"event":"exited"}\n\x00\xff'
        stream = b'{"id":1,"ok":true}\n' + frame(payload) + b'{"event":"exited","session":"s","gen":1}\n'
        for cut in range(len(stream) + 1):
            d = Decoder()
            msgs = d.feed(stream[:cut]) + d.feed(stream[cut:])
            self.assertEqual([m.get("event", "resp") for m in msgs], ["resp", "output", "exited"], cut)
            self.assertEqual(msgs[1]["_data"], payload)
        one_byte = Decoder()
        msgs = [m for b in stream for m in one_byte.feed(bytes([b]))]
        self.assertEqual(len(msgs), 3)

    def test_out_of_step_frame_is_refused(self) -> None:
        bad = frame(b"abc")[:-1] + b"X"
        with self.assertRaises(ProtocolError):
            Decoder().feed(bad)

    def test_overlong_line_is_refused(self) -> None:
        with self.assertRaises(ProtocolError):
            Decoder().feed(b"{" + b" " * (2 << 20))

    def test_typed_events(self) -> None:
        ev = types.event_from_json({"event": "dropped", "session": "s", "from": 3, "to": 10})
        self.assertEqual(ev, types.Dropped("s", 3, 10))
        self.assertEqual(ev.missed, 7)
        ev = types.event_from_json({"event": "brand_new", "session": "s", "x": 1})
        self.assertIsInstance(ev, types.UnknownEvent)
        self.assertEqual(types.event_from_json({"event": "unhealthy", "session": "s", "gen": 4, "failures": 3}),
                         types.Unhealthy("s", 4, 3))
        self.assertEqual(types.event_from_json({"event": "ready", "session": "s", "gen": 4}), types.Ready("s", 4))
        self.assertEqual(types.event_from_json({"event": "ready_failed", "session": "s", "gen": 4, "reason": "r"}),
                         types.ReadyFailed("s", 4, "r"))

    def test_hello_log_writer_and_reload_plan(self) -> None:
        info = types.ServerInfo.from_json({"protocol": 1, "log_writer": {"pid": None, "restarts": 1, "dropped_bytes": 7}})
        self.assertEqual(info.log_writer, types.LogWriter(None, 1, 7))
        self.assertIsNone(types.ServerInfo.from_json({"protocol": 1}).log_writer)
        plan = types.ReloadPlan.from_json({"dry_run": True, "start": ["a"], "stop": [], "replace": ["b"], "busy": [], "unchanged": []})
        self.assertEqual(plan, types.ReloadPlan(True, ("a",), (), ("b",), (), ()))
        self.assertEqual(types.LogFile("/l", keep=0).to_json(), {"path": "/l", "keep": 0})


class TestEncoding(unittest.TestCase):
    def test_requests(self) -> None:
        self.assertEqual(encode_request({"id": 1, "op": "get", "session": "é", "if_gen": None}),
                         '{"id":1,"op":"get","session":"é"}\n'.encode())
        self.assertEqual(input_member(b"\x00\xff"), ("data_b64", "AP8="))
        self.assertEqual(input_member("hi"), ("data", "hi"))
        args = spawn_args("s", ["a", "b"], {"pty": (10, 20), "grace": "1s", "restart": "always", "cwd": None})
        self.assertEqual(args, {"op": "spawn", "session": "s", "argv": ["a", "b"],
                                "pty": {"rows": 10, "cols": 20}, "grace": "1s",
                                "restart": {"mode": "always"}})
        with self.assertRaises(TypeError):
            spawn_args("s", "echo hi", {})  # type: ignore[arg-type]

    def test_a_relative_cwd_is_the_callers(self) -> None:
        here = os.getcwd()
        self.assertEqual(spawn_args("s", ["a"], {"cwd": "sub/dir"})["cwd"], os.path.join(here, "sub", "dir"))
        self.assertEqual(spawn_args("s", ["a"], {"cwd": pathlib.Path(".")})["cwd"], here)
        self.assertEqual(spawn_args("s", ["a"], {"cwd": "/srv/../srv"})["cwd"], "/srv")


class TestReadinessMembers(unittest.TestCase):
    def test_ready_live_and_depends_on_are_spelled_as_the_protocol_spells_them(self) -> None:
        import datetime

        args = spawn_args(
            "web",
            ["serve"],
            {
                "ready": {"tcp": "127.0.0.1:8080", "timeout": datetime.timedelta(seconds=30), "interval": "200ms"},
                "live": {"command": ["check"], "interval": 5000, "failures": 2},
                "depends_on": {"db": "ready"},
            },
        )
        self.assertEqual(args["ready"], {"tcp": "127.0.0.1:8080", "timeout": 30000, "interval": "200ms"})
        self.assertEqual(args["live"], {"command": ["check"], "interval": 5000, "failures": 2})
        self.assertEqual(args["depends_on"], {"db": "ready"})


class TestSocketPath(unittest.TestCase):
    def test_run_as_members(self) -> None:
        none = run_as_members(user=None, group=None, groups=None, umask=None, env_file=None, rlimits=None)
        self.assertEqual(none, {})
        got = run_as_members(
            user="www-data",
            group=33,
            groups=["adm", 4],
            umask=0o27,
            env_file=pathlib.Path("/etc/app.env"),
            rlimits={"nofile": 4096, "core": genward.Rlimit(0, "infinity"), "cpu": "infinity"},
        )
        self.assertEqual(
            got,
            {
                "user": "www-data",
                "group": 33,
                "groups": ["adm", 4],
                "umask": "027",
                "env_file": "/etc/app.env",
                "rlimits": {"nofile": 4096, "core": {"soft": 0, "hard": "infinity"}, "cpu": "infinity"},
            },
        )
        bads: List[Dict[str, Any]] = [{"groups": "adm"}, {"rlimits": {"nofile": -1}}, {"rlimits": {"nofile": "lots"}}]
        for bad in bads:
            kw: Dict[str, Any] = dict(user=None, group=None, groups=None, umask=None, env_file=None, rlimits=None)
            kw.update(bad)
            with self.assertRaises(TypeError, msg=str(bad)):
                run_as_members(**kw)
        with self.assertRaises(ValueError):
            run_as_members(user=None, group=None, groups=None, umask=0o1000, env_file=None, rlimits=None)

    def test_rules(self) -> None:
        with mock.patch.dict(os.environ, {"GENWARD_SOCKET": "/x/s.sock", "GENWARD_STATE_DIR": "/y"}):
            self.assertEqual(default_socket_path(), "/x/s.sock")
        with mock.patch.dict(os.environ, {"GENWARD_SOCKET": "", "GENWARD_STATE_DIR": "/y"}):
            self.assertEqual(default_socket_path(), "/y/genward.sock")
        env = {"GENWARD_SOCKET": "", "GENWARD_STATE_DIR": "", "XDG_RUNTIME_DIR": "/run/user/7"}
        with mock.patch.dict(os.environ, env), mock.patch("os.geteuid", return_value=1000):
            self.assertEqual(default_socket_path(), "/run/user/7/genward/genward.sock")
        with mock.patch.dict(os.environ, env), mock.patch("os.geteuid", return_value=0):
            self.assertEqual(default_socket_path(), "/run/genward/genward.sock")



class FakeDaemon:
    """A socket that answers `hello` as told, to test what the client makes of it."""

    def __init__(self, hello: dict) -> None:
        import socket
        import tempfile
        import threading

        self.dir = tempfile.mkdtemp(prefix="gw-fake-")
        self.path = os.path.join(self.dir, "fake.sock")
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.path)
        self.srv.listen(1)
        self.hello = hello
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        conn, _ = self.srv.accept()
        with conn, conn.makefile("rwb") as f:
            for line in f:
                req = json.loads(line)
                f.write(json.dumps({"id": req["id"], "ok": True, **self.hello}).encode() + b"\n")
                f.flush()

    def close(self) -> None:
        import shutil

        self.srv.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class TestHelloChecks(unittest.TestCase):
    def check(self, hello: dict) -> None:
        import genward

        fake = FakeDaemon(hello)
        self.addCleanup(fake.close)
        with self.assertRaises(genward.IncompatibleDaemon):
            genward.Client(fake.path, reconnect=False)

    def test_another_protocol_is_refused(self) -> None:
        self.check({"protocol": 2, "capabilities": ["output_frames", "replay", "if_gen", "wait"]})

    def test_a_missing_capability_is_refused(self) -> None:
        self.check({"protocol": 1, "capabilities": ["output_frames", "replay", "wait"]})


class TestReadmeSignatures(unittest.TestCase):
    """The signatures the README spells out name exactly the parameters the methods take,
    in both clients (``spawn``'s typed keywords may be named in its prose instead)."""

    def test_every_documented_signature_matches_the_code(self) -> None:
        import inspect
        import re

        from genward.aio import AsyncProcess, AsyncSubscription
        from genward.client import Process, Subscription

        path = pathlib.Path(__file__).resolve().parent.parent / "README.md"
        readme = path.read_text()

        def section(title: str) -> str:
            start = readme.index(f"## {title}\n")
            end = readme.find("\n## ", start + 1)
            return readme[start:end if end >= 0 else None]

        C, A = genward.Client, genward.AsyncClient
        checks = [
            ("Connecting", "Client(", [C.__init__, A.__init__, C.connect, A.connect]),
            ("Processes", "client.spawn(", [C.spawn, A.spawn]),
            ("Processes", "write(", [Process.write, AsyncProcess.write]),
            ("Processes", "resize(", [Process.resize, AsyncProcess.resize]),
            ("Processes", "kill(", [Process.kill, AsyncProcess.kill]),
            ("Processes", "stop(", [Process.stop, AsyncProcess.stop]),
            ("Processes", "wait(", [Process.wait, AsyncProcess.wait]),
            ("Processes", "events(", [Process.events, AsyncProcess.events]),
            ("Processes", "read_all(", [Process.read_all, AsyncProcess.read_all]),
            ("Sessions", "attach(", [C.attach, A.attach]),
            ("Sessions", "wait(", [C.wait, A.wait]),
            ("Sessions", "wait_ready(", [C.wait_ready, A.wait_ready]),
            ("Sessions", "stop(", [C.stop, A.stop]),
            ("Sessions", "restart(", [C.restart, A.restart]),
            ("Sessions", "reload(", [C.reload, A.reload]),
            ("Sessions", "request(", [C.request, A.request]),
            ("Replay", "client.subscribe(", [C.subscribe, A.subscribe]),
            ("Replay", "sub.events(", [Subscription.events, AsyncSubscription.events]),
            ("Replay", "sub.until_exit(", [Subscription.until_exit, AsyncSubscription.until_exit]),
        ]
        for title, prefix, fns in checks:
            text = section(title)
            start = text.index("`" + prefix) + 1
            span = text[start:text.index(")`", start)]
            documented = [
                re.sub(r"[*=].*", "", p.strip().lstrip("*")).strip()
                for p in span[len(prefix):].replace("\n", " ").split(",")
            ]
            documented = [d for d in documented if d]
            for fn in fns:
                with self.subTest(signature=span, of=fn.__qualname__):
                    params = [n for n in inspect.signature(fn).parameters if n not in ("self", "cls")]
                    missing = [n for n in params if n not in documented]
                    if prefix == "client.spawn(":
                        missing = [n for n in missing if f"`{n}`" not in text and f"`{n}=" not in text]
                    self.assertEqual(missing, [], "parameters the README leaves out")
                    self.assertEqual([d for d in documented if d not in params], [], "documented, not taken")

if __name__ == "__main__":
    unittest.main()


class TestNoAnswer(unittest.TestCase):
    """A socket where something listens but never answers ``hello``: no daemon there,
    ``NoDaemon`` (a ``GenwardError``), not the built-in ``TimeoutError``."""

    def test_both_clients_give_up_with_the_same_error(self) -> None:
        import asyncio
        import socket
        import tempfile

        import genward

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "mute.sock")
            srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            srv.bind(path)
            srv.listen(4)
            try:
                said = f"no answer to hello from {path} within 0.3s"
                with self.assertRaises(genward.NoDaemon) as cm:
                    genward.Client(path, timeout=0.3)
                self.assertEqual(str(cm.exception), said)

                async def connect() -> None:
                    await genward.AsyncClient.connect(path, timeout=0.3)

                with self.assertRaises(genward.NoDaemon) as cm:
                    asyncio.run(connect())
                self.assertEqual(str(cm.exception), said)
            finally:
                srv.close()


class TestReconnectionSubscribesOnce(unittest.TestCase):
    """A subscription asked for just before the connection broke, not answered: the next
    connection carries one subscription of that session, not the lost request and a
    resumption besides."""

    def test_one_subscribe_per_session_after_a_reconnection(self) -> None:
        import socket
        import tempfile
        import threading

        hello = {"protocol": 1, "capabilities": ["output_frames", "replay", "if_gen", "wait"], "pid": 1}
        seen: List[List[Dict[str, Any]]] = []
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "fake.sock")
            srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            srv.bind(path)
            srv.listen(2)
            second_done = threading.Event()

            def serve() -> None:
                # First connection: hello and spawn answered; the connection breaks on
                # the subscription the spawn brings, before its answer.
                for first in (True, False):
                    conn, _ = srv.accept()
                    got: List[Dict[str, Any]] = []
                    seen.append(got)
                    with conn, conn.makefile("rwb") as f:
                        for line in f:
                            req = json.loads(line)
                            got.append(req)
                            if first and req["op"] == "subscribe":
                                break
                            answer: Dict[str, Any] = {"id": req["id"], "ok": True}
                            if req["op"] == "hello":
                                answer.update(hello)
                            elif req["op"] == "spawn":
                                answer["gen"] = 7
                            elif req["op"] == "list":
                                answer["sessions"] = []
                            f.write(json.dumps(answer).encode() + b"\n")
                            if req["op"] == "subscribe":
                                started = {"event": "spawned", "session": "s", "gen": 7, "pid": 4242}
                                f.write(json.dumps(started).encode() + b"\n")
                            f.flush()
                            if not first and req["op"] == "list":
                                second_done.set()
                                break

            thread = threading.Thread(target=serve, daemon=True)
            thread.start()
            try:
                client = genward.Client(path, timeout=10, reconnect_timeout=10)
                try:
                    client.spawn("s", ["cat"])
                    client.list()
                    self.assertTrue(second_done.wait(10))
                finally:
                    client.close()
            finally:
                srv.close()
        self.assertEqual(len(seen), 2, seen)
        subs = [(r["session"], r.get("from_gen")) for r in seen[1] if r["op"] == "subscribe"]
        self.assertEqual(subs, [("s", 7)], seen[1])


class TestUnreadStream(unittest.TestCase):
    def test_a_handle_nobody_reads_keeps_at_most_its_cap_even_behind_other_events(self) -> None:
        from genward._engine import _Stream

        cap = 1 << 20
        s = _Stream("s", cap, lossy=True)
        # What a spawned handle's stream starts with, then a flood nobody iterates.
        s.push(types.Spawned("s", 1, 42))
        s.push(types.StateChange("s", 1, "running"))
        chunk = b"x" * (64 << 10)
        pos = 0
        most = 0
        for _ in range(400):  # 25 MiB
            s.push(types.Output("s", 1, "stdout", pos, pos, chunk))
            pos += len(chunk)
            most = max(most, s.size)
        self.assertEqual(most, cap, "the unread output is bounded by keep, never more")
        kinds = [type(e).__name__ for e in s.items]
        self.assertEqual(kinds[:3], ["Spawned", "StateChange", "Dropped"], "other events kept, in order")
        drop = s.items[2]
        first = next(e for e in s.items if isinstance(e, types.Output))
        self.assertEqual((drop.start, drop.end), (0, first.pos), "the gap is exactly what was discarded")
