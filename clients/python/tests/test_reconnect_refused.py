"""A daemon that accepts connections and ends them before answering hello (it refuses this
client, or is at its connection limit) must not make a reconnecting client spin: it backs
off, and gives up `reconnect_timeout` after the loss."""

import json
import os
import socket
import tempfile
import threading
import time
import unittest

import genward

HELLO = {
    "ok": True,
    "protocol": 1,
    "version": "0.1.0",
    "pid": 1,
    "capabilities": ["pipes", "output_frames", "replay", "if_gen", "wait", "list_pages"],
}
REFUSAL = b'{"id":null,"ok":false,"error":{"code":"limit","message":"too many connections (limit 4096)"}}\n'


class RefusingDaemon:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        self.sock.listen(64)
        self.accepted = 0
        self.stopped = False
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while not self.stopped:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            if self.accepted == 1:
                # The first connection is served: it answers hello, then the daemon goes.
                line = b""
                while not line.endswith(b"\n"):
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    line += chunk
                req = json.loads(line.split(b"\n")[0])
                s.sendall(json.dumps({"id": req["id"], **HELLO}).encode() + b"\n")
                time.sleep(0.2)
                s.close()
                continue
            try:
                s.sendall(REFUSAL)
            except OSError:
                pass
            s.close()

    def stop(self):
        self.stopped = True
        self.sock.close()


class ReconnectRefused(unittest.TestCase):
    def test_sync_client_backs_off_and_gives_up(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "genward.sock")
            daemon = RefusingDaemon(path)
            try:
                c = genward.Client(path, timeout=2, reconnect_timeout=2)
                # It gives up (it never did: it reconnected forever, at full speed).
                t0 = time.monotonic()
                while not c.closed and time.monotonic() - t0 < 60:
                    time.sleep(0.1)
                self.assertTrue(c.closed, "the client still reconnects a minute after the loss")
                with self.assertRaises(genward.ConnectionLost):
                    c.list()
                c.close()
            finally:
                daemon.stop()


if __name__ == "__main__":
    unittest.main()
