"""What a client is told when what serves the socket will not talk with it: a daemon's
refusal of the connection is its typed error with its message, and something that does
not speak the protocol is a ProtocolError — for both clients, never a lost connection.
(Something that never answers hello: test_wire.TestNoAnswer.)"""

import json
import os
import socket
import tempfile
import threading
import unittest
from typing import Callable, List

import genward

#: As the daemon refuses a uid it does not allow, and a connection past its cap.
REFUSALS = [
    (genward.PermissionDenied, "permission_denied", "uid 65534 may not use this daemon (owner uid 0; start it with --allow-uid 65534 to permit)"),
    (genward.Limit, "limit", "too many connections (limit 4096)"),
]


class Server:
    """Serves each connection to a socket of its own with ``serve(conn)``, on a thread."""

    def __init__(self, serve: Callable[[socket.socket], None]):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "genward.sock")
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(self.path)
        self.sock.listen(16)
        self.conns: List[socket.socket] = []
        self.serve = serve
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()
        self.dir.cleanup()


def refusing(code: str, message: str) -> Callable[[socket.socket], None]:
    """As the daemon refuses a connection: its reason as it accepts it, then closed."""

    def serve(conn: socket.socket) -> None:
        conn.sendall(json.dumps({"id": None, "ok": False, "error": {"code": code, "message": message}}).encode() + b"\n")
        conn.close()

    return serve


def answering(answer: bytes) -> Callable[[socket.socket], None]:
    """Answers the first request with ``answer``, then closes."""

    def serve(conn: socket.socket) -> None:
        conn.recv(4096)
        conn.sendall(answer)
        conn.close()

    return serve


GARBAGE = [b"HTTP/1.1 400 Bad Request\r\n\r\n", b"\x00\xff garbage\n"]


class ConnectErrors(unittest.TestCase):
    def serving(self, serve: Callable[[socket.socket], None]) -> Server:
        server = Server(serve)
        self.addCleanup(server.close)
        return server

    def test_a_refusal_is_the_daemons_typed_error(self) -> None:
        for kind, code, message in REFUSALS:
            for reconnect in (True, False):
                with self.subTest(code=code, reconnect=reconnect):
                    server = self.serving(refusing(code, message))
                    with self.assertRaises(kind) as caught:
                        genward.Client(server.path, timeout=10, reconnect=reconnect)
                    self.assertEqual((caught.exception.code, caught.exception.message), (code, message))

    def test_an_answer_not_in_the_protocol_is_a_protocol_error(self) -> None:
        for answer in GARBAGE:
            with self.subTest(answer=answer):
                server = self.serving(answering(answer))
                with self.assertRaises(genward.ProtocolError) as caught:
                    genward.Client(server.path, timeout=10)
                self.assertIn(server.path, str(caught.exception))


class AsyncConnectErrors(unittest.IsolatedAsyncioTestCase):
    def serving(self, serve: Callable[[socket.socket], None]) -> Server:
        server = Server(serve)
        self.addCleanup(server.close)
        return server

    async def test_a_refusal_is_the_daemons_typed_error(self) -> None:
        for kind, code, message in REFUSALS:
            for reconnect in (True, False):
                with self.subTest(code=code, reconnect=reconnect):
                    server = self.serving(refusing(code, message))
                    with self.assertRaises(kind) as caught:
                        await genward.AsyncClient.connect(server.path, timeout=10, reconnect=reconnect)
                    self.assertEqual((caught.exception.code, caught.exception.message), (code, message))

    async def test_an_answer_not_in_the_protocol_is_a_protocol_error(self) -> None:
        for answer in GARBAGE:
            with self.subTest(answer=answer):
                server = self.serving(answering(answer))
                with self.assertRaises(genward.ProtocolError):
                    await genward.AsyncClient.connect(server.path, timeout=10)


if __name__ == "__main__":
    unittest.main()
