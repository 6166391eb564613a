"""`spawn` refuses an argv it would mangle, before anything is sent: a string (which
`list()` would split into one-character arguments) and bytes arguments (which `str()`
would turn into "b'...'")."""

import json
import os
import socket
import tempfile
import threading
import unittest

import genward
from genward import AsyncClient

HELLO = {"ok": True, "protocol": 1, "version": "0.1.0", "pid": 1,
         "capabilities": ["pipes", "output_frames", "replay", "if_gen", "wait", "list_pages"]}


class HelloOnly:
    """Answers hello; every other request is recorded and never answered."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        self.sock.listen(8)
        self.ops = []
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.conn, args=(s,), daemon=True).start()

    def conn(self, s):
        buf = b""
        while True:
            try:
                chunk = s.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                req = json.loads(line)
                self.ops.append(req["op"])
                if req["op"] == "hello":
                    s.sendall(json.dumps({"id": req["id"], **HELLO}).encode() + b"\n")


class SpawnArgvTypes(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "genward.sock")
        self.daemon = HelloOnly(self.path)

    def tearDown(self):
        self.daemon.sock.close()
        self.dir.cleanup()

    def test_sync_refuses_a_string_and_bytes(self):
        with genward.Client(self.path, timeout=1) as c:
            with self.assertRaises(TypeError):
                c.spawn("s", "true")
            with self.assertRaises(TypeError):
                c.spawn("s", ["echo", b"\xff"])
        self.assertNotIn("spawn", self.daemon.ops)

    def test_async_refuses_a_string(self):
        import asyncio

        async def main():
            async with await AsyncClient.connect(self.path, timeout=1) as c:
                with self.assertRaises(TypeError):
                    await c.spawn("s", "true")

        asyncio.run(main())
        self.assertNotIn("spawn", self.daemon.ops)


if __name__ == "__main__":
    unittest.main()
