"""The wire format, without I/O: where the socket is, how a request is encoded, and a
decoder that turns the bytes the daemon sends into messages (JSON lines, and output
frames: a header line, ``len`` raw bytes, one ``\\n``)."""

from __future__ import annotations

import base64
import datetime
import json
import os
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import Limit, NoDaemon, ProtocolError
from .types import LogFile, Rlimit, RlimitValue

#: The protocol version this client speaks.
PROTOCOL = 1
#: Capabilities the client relies on; a daemon without them is refused.
REQUIRED_CAPABILITIES = ("output_frames", "replay", "if_gen", "wait")
#: The daemon's line limit (1 MiB, not counting the ``\n``); a line may also carry
#: JSON whitespace (a ``\r``) around it, hence a little slack.
MAX_LINE = 1 << 20
_LINE_SLACK = 64
#: The largest output frame the daemon sends.
MAX_FRAME = 1 << 20

Duration = Union[int, str, datetime.timedelta]


def default_socket_path() -> str:
    """The daemon's socket, by the command line's rules: ``GENWARD_SOCKET``, else
    ``genward.sock`` in ``GENWARD_STATE_DIR``, else in the default state directory
    (``/run/genward`` as root, ``$XDG_RUNTIME_DIR/genward`` otherwise)."""
    sock = os.environ.get("GENWARD_SOCKET")
    if sock:
        return sock
    state = os.environ.get("GENWARD_STATE_DIR")
    if not state:
        if os.geteuid() == 0:
            state = "/run/genward"
        else:
            xdg = os.environ.get("XDG_RUNTIME_DIR")
            if not xdg:
                raise NoDaemon(
                    "no default daemon socket: XDG_RUNTIME_DIR is unset; "
                    "pass a socket path or set GENWARD_SOCKET"
                )
            state = os.path.join(xdg, "genward")
    return os.path.join(state, "genward.sock")


def encode_request(obj: Mapping[str, Any]) -> bytes:
    """One request line: compact JSON, UTF-8, ``\\n``-terminated; ``None`` members are
    left out (the daemon reads ``null`` as absent anyway)."""
    clean = {k: v for k, v in obj.items() if v is not None}
    return json.dumps(clean, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n"


def duration(v: Duration) -> Union[int, str]:
    """A duration as the protocol spells it: milliseconds, or a string like ``"5s"``."""
    if isinstance(v, datetime.timedelta):
        return int(v.total_seconds() * 1000)
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise TypeError(f"a duration is milliseconds (int), a string like '5s' or a timedelta, not {v!r}")
    return v


def input_member(data: Union[bytes, bytearray, memoryview, str]) -> Tuple[str, str]:
    """The request member carrying input: ``data`` for text, ``data_b64`` for bytes."""
    if isinstance(data, str):
        return "data", data
    return "data_b64", base64.b64encode(bytes(data)).decode("ascii")


#: Bytes of input per ``write`` request: a request is one line of at most 1 MiB, and
#: base64 makes bytes a third longer. A longer write goes in pieces, in order.
WRITE_PIECE = 256 * 1024


def input_pieces(data: Union[bytes, bytearray, memoryview, str]) -> List[Tuple[str, str]]:
    """The input members of the ``write`` requests that carry ``data``, in order: one for
    anything up to :data:`WRITE_PIECE` bytes, else pieces of that many bytes."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if len(raw) <= WRITE_PIECE:
        return [input_member(data)]
    return [input_member(raw[i : i + WRITE_PIECE]) for i in range(0, len(raw), WRITE_PIECE)]


#: The first and the longest wait, in seconds, before a write refused for want of room in
#: the daemon's input queue asks again (the wait doubles in between).
ROOM_FIRST_WAIT = 0.005
ROOM_MAX_WAIT = 0.2

_QUEUED = re.compile(r"(\d+) bytes already queued")


def input_queue_full(err: BaseException) -> bool:
    """Whether ``err`` refuses a ``write`` because the generation's input queue is full
    (``limit``: "N bytes already queued for generation G, limit M"): room comes as the
    process reads. With nothing queued (N = 0) the input alone is past the limit, and no
    room ever comes."""
    if not isinstance(err, Limit):
        return False
    queued = _QUEUED.search(err.message)
    return queued is not None and int(queued.group(1)) > 0


class RoomWait:
    """How a write waits for room for one piece, from its first refusal at ``now`` (the
    caller's clock, in seconds): :meth:`next` is how long to wait before asking again, or
    ``None`` once ``timeout`` (``None``: no bound) has passed."""

    def __init__(self, timeout: Optional[float], now: float):
        self.deadline = None if timeout is None else now + timeout
        self.wait = ROOM_FIRST_WAIT

    def next(self, now: float) -> Optional[float]:
        wait = self.wait
        self.wait = min(self.wait * 2, ROOM_MAX_WAIT)
        if self.deadline is None:
            return wait
        left = self.deadline - now
        if left <= 0:
            return None
        return min(wait, left)


_DURATIONS = ("grace", "kill_grace", "drain")


def ready_end(session: str, end: Mapping[str, Any]) -> Dict[str, Any]:
    """The event answering a readiness ``wait``, if it is ``ready``; else raises
    :class:`NotReady` saying why the generation never will be."""
    from .errors import NotReady

    if end.get("event") == "ready":
        return dict(end)
    if end.get("event") == "ready_failed":
        why = f"readiness failed: {end.get('reason')}"
    else:
        why = f"ended before it was ready ({end.get('event')})"
    raise NotReady(f"{session} gen {end.get('gen')}: {why}", dict(end))


def spawn_args(session: str, argv: Sequence[Any], opts: Mapping[str, Any]) -> Dict[str, Any]:
    """The ``spawn`` request's members, from :meth:`Client.spawn`'s keyword options
    (named as the protocol names them)."""
    if isinstance(argv, (str, bytes, bytearray)):
        raise TypeError("argv is a list of strings (no shell): ['sh', '-c', '...']")
    words = []
    for i, a in enumerate(argv):
        if isinstance(a, (bytes, bytearray)):
            # str() of bytes is "b'...'": the process would get another argument than given.
            raise TypeError(f"argv[{i}] is {type(a).__name__}; arguments are sent as text (str)")
        words.append(a if isinstance(a, str) else str(a))
    args: Dict[str, Any] = {"op": "spawn", "session": session, "argv": words}
    for key, value in opts.items():
        if value is None:
            continue
        if key in _DURATIONS:
            value = duration(value)
        elif key == "pty":
            if isinstance(value, tuple):
                rows, cols = value
                value = {"rows": int(rows), "cols": int(cols)}
        elif key == "cwd":
            # As the caller means it: the daemon would take a relative one from its own
            # working directory.
            value = os.path.abspath(os.fspath(value))
        elif key == "env":
            value = {str(k): str(v) for k, v in dict(value).items()}
        elif key == "restart" and isinstance(value, str):
            value = {"mode": value}
        elif key in ("ready", "live"):
            # Their durations (``timeout``, ``interval``) as the protocol spells them.
            value = {k: duration(v) if k in ("timeout", "interval") else v for k, v in dict(value).items()}
        elif key == "log":
            value = value.to_json() if isinstance(value, LogFile) else dict(value)
        elif key == "depends_on":
            value = {str(k): str(v) for k, v in dict(value).items()}
        args[key] = value
    return args


def _bound(name: str, v: Any) -> Any:
    if v == "infinity" or (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
        return v
    raise TypeError(f"rlimits[{name!r}]: a bound is a non-negative int or 'infinity', not {v!r}")


def run_as_members(
    *,
    user: Union[str, int, None],
    group: Union[str, int, None],
    groups: Optional[Sequence[Union[str, int]]],
    umask: Union[str, int, None],
    env_file: Union[str, "os.PathLike[str]", None],
    rlimits: Optional[Mapping[str, RlimitValue]],
) -> Dict[str, Any]:
    """The ``spawn`` members of whom the process runs as, from :meth:`Client.spawn`'s
    typed options; absent ones are left out (the daemon's own apply)."""
    out: Dict[str, Any] = {}
    if user is not None:
        out["user"] = user
    if group is not None:
        out["group"] = group
    if groups is not None:
        if isinstance(groups, (str, bytes)):
            raise TypeError("groups is a list of names or gids, not a string")
        out["groups"] = list(groups)
    if umask is not None:
        if isinstance(umask, int) and not isinstance(umask, bool):
            if not 0 <= umask <= 0o777:
                raise ValueError(f"umask: {umask:#o} is not a mode from 0o000 to 0o777")
            umask = format(umask, "03o")
        out["umask"] = umask
    if env_file is not None:
        out["env_file"] = os.fspath(env_file)
    if rlimits is not None:
        limits: Dict[str, Any] = {}
        for name, v in rlimits.items():
            if isinstance(v, Rlimit):
                limits[name] = {"soft": _bound(name, v.soft), "hard": _bound(name, v.hard)}
            else:
                limits[name] = _bound(name, v)
        out["rlimits"] = limits
    return out


class Decoder:
    """Turns the daemon's byte stream into messages.

    :meth:`feed` returns each complete message as a dict; an output frame's bytes are in
    its ``"_data"`` member. Raises :class:`ProtocolError` when the stream is out of step
    (a line over the limit, a frame not ended by ``\\n``, invalid JSON).
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._frame: Optional[Dict[str, Any]] = None
        self._scan = 0

    def feed(self, data: bytes) -> List[Dict[str, Any]]:
        buf = self._buf
        buf += data
        out: List[Dict[str, Any]] = []
        while True:
            frame = self._frame
            if frame is not None:
                n = frame["len"]
                if len(buf) < n + 1:
                    break
                if buf[n] != 0x0A:
                    raise ProtocolError("output frame not followed by a newline: the stream is out of step")
                frame["_data"] = bytes(buf[:n])
                del buf[: n + 1]
                self._frame = None
                out.append(frame)
                continue
            nl = buf.find(b"\n", self._scan)
            if nl < 0:
                if len(buf) > MAX_LINE + _LINE_SLACK:
                    raise ProtocolError(f"a line from the daemon is longer than {MAX_LINE} bytes")
                self._scan = len(buf)
                break
            line = bytes(buf[:nl])
            del buf[: nl + 1]
            self._scan = 0
            try:
                msg = json.loads(line)
            except ValueError as e:
                raise ProtocolError(f"invalid JSON from the daemon: {e}") from None
            if not isinstance(msg, dict):
                raise ProtocolError(f"a message from the daemon is not an object: {line[:80]!r}")
            if msg.get("event") == "output":
                n = msg.get("len")
                if not isinstance(n, int) or isinstance(n, bool) or n < 0 or n > MAX_FRAME:
                    raise ProtocolError(f"output frame with a bad len: {n!r}")
                self._frame = msg
                continue
            out.append(msg)
        return out
