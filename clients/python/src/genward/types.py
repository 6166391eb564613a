"""Typed values of the protocol: the daemon's hello, sessions and generations as ``list``
and ``get`` answer them, and the events a subscription delivers.

Every type keeps the JSON it was read from in ``raw``: the daemon may add members
without a protocol change, and a program can still reach them there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import os
from typing import Any, Dict, Literal, Mapping, Optional, Tuple, Union


#: One bound of a resource limit: a number (in ``setrlimit``'s unit), or no limit.
RlimitBound = Union[int, Literal["infinity"]]


@dataclass(frozen=True)
class Rlimit:
    """A resource limit with different soft and hard bounds, for ``spawn``'s ``rlimits``
    (a plain :data:`RlimitBound` sets both alike)."""

    #: What the process gets.
    soft: RlimitBound
    #: How far the process may raise ``soft`` (without privileges).
    hard: RlimitBound


#: A value of ``spawn``'s ``rlimits``: one bound for soft and hard alike, or each.
RlimitValue = Union[RlimitBound, Rlimit]


def _opt_int(v: Any) -> Optional[int]:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass(frozen=True)
class LogFile:
    """``spawn``'s ``log``: the session's output (stdout and stderr, every generation's) is
    also written to ``path``, appended and rotated by the daemon's log writer."""

    #: An absolute path in a directory that exists; created mode 0640 if missing.
    path: str
    #: Rotate before the file would grow past this many bytes (daemon default 10 MiB,
    #: 4096 to 1 TiB).
    max_size: Optional[int] = None
    #: Rotated files kept, ``path.1`` ... ``path.N`` (daemon default 5, at most 1000; 0
    #: keeps none).
    keep: Optional[int] = None

    def to_json(self) -> Dict[str, Any]:
        """The protocol's ``log`` member (absent fields left to the daemon's defaults)."""
        out: Dict[str, Any] = {"path": os.fspath(self.path)}
        if self.max_size is not None:
            out["max_size"] = self.max_size
        if self.keep is not None:
            out["keep"] = self.keep
        return out


@dataclass(frozen=True)
class LogWriter:
    """``hello``'s ``log_writer``: the process writing the sessions' ``log`` files."""

    #: ``None`` until one is needed, and while one that died waits to be started again.
    pid: Optional[int]
    #: How many times it was started again after dying.
    restarts: int
    #: Output bytes dropped because it fell behind, since the daemon started.
    dropped_bytes: int

    @classmethod
    def from_json(cls, o: Mapping[str, Any]) -> "LogWriter":
        return cls(
            pid=_opt_int(o.get("pid")),
            restarts=int(o.get("restarts", 0)),
            dropped_bytes=int(o.get("dropped_bytes", 0)),
        )


@dataclass(frozen=True)
class ReloadPlan:
    """What ``reload`` did (or, with ``dry_run``, would do): session names, each in name
    order."""

    dry_run: bool
    #: Sessions new to the configuration: started.
    start: Tuple[str, ...]
    #: Sessions the configuration started and no longer has: stopped and removed.
    stop: Tuple[str, ...]
    #: Sessions whose spec changed: a new generation, per their ``on_busy``.
    replace: Tuple[str, ...]
    #: Sessions whose spec changed, left running because their ``on_busy`` is ``reject``.
    busy: Tuple[str, ...]
    #: Sessions not touched at all: same generation, same process.
    unchanged: Tuple[str, ...]
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, o: Mapping[str, Any]) -> "ReloadPlan":
        def names(key: str) -> Tuple[str, ...]:
            return tuple(str(n) for n in o.get(key) or ())

        return cls(
            dry_run=bool(o.get("dry_run", False)),
            start=names("start"),
            stop=names("stop"),
            replace=names("replace"),
            busy=names("busy"),
            unchanged=names("unchanged"),
            raw=dict(o),
        )


@dataclass(frozen=True)
class ServerInfo:
    """What ``hello`` answered: the daemon's protocol, version and capabilities."""

    protocol: int
    version: str
    pid: int
    identity: str
    reaper: str
    containment: str
    keeper: bool
    capabilities: Tuple[str, ...]
    #: The process writing ``log`` files (``None`` from a daemon that does not say).
    log_writer: Optional[LogWriter] = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, o: Mapping[str, Any]) -> "ServerInfo":
        return cls(
            protocol=int(o.get("protocol", 0)),
            version=str(o.get("version", "")),
            pid=int(o.get("pid", 0)),
            identity=str(o.get("identity", "")),
            reaper=str(o.get("reaper", "")),
            containment=str(o.get("containment", "")),
            keeper=bool(o.get("keeper", False)),
            capabilities=tuple(str(c) for c in o.get("capabilities", ())),
            log_writer=LogWriter.from_json(o["log_writer"]) if isinstance(o.get("log_writer"), Mapping) else None,
            raw=dict(o),
        )


@dataclass(frozen=True)
class End:
    """How a generation ended, as ``last_end`` and ``recent_ends`` report it; ``error``
    says why one that could not start (``cause == "spawn_failed"``) did not."""

    gen: int
    code: Optional[int]
    signal: Optional[str]
    cause: str
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    error: Optional[SpawnFailure] = None

    @classmethod
    def from_json(cls, o: Mapping[str, Any], session: str = "") -> "End":
        err = o.get("error")
        return cls(
            gen=int(o.get("gen", 0)),
            code=_opt_int(o.get("code")),
            signal=o.get("signal"),
            cause=str(o.get("cause", "")),
            raw=dict(o),
            error=SpawnFailure.from_json({"session": session, **o}) if isinstance(err, Mapping) else None,
        )


@dataclass(frozen=True)
class Adopted:
    """A generation taken back after a crash of the daemon."""

    since_unix_ms: int
    io_lost: bool
    verified: bool

    @classmethod
    def from_json(cls, o: Mapping[str, Any]) -> "Adopted":
        return cls(
            since_unix_ms=int(o.get("since_unix_ms", 0)),
            io_lost=bool(o.get("io_lost", False)),
            verified=bool(o.get("verified", True)),
        )


@dataclass(frozen=True)
class Generation:
    """One live generation of a session (``generations`` in ``list`` and ``get``)."""

    gen: int
    pid: Optional[int]
    lifecycle: str
    since_unix_ms: Optional[int]
    superseded: bool
    offsets: Mapping[str, int]
    discarded: int
    pending_input: int
    containment: Optional[str]
    adopted: Optional[Adopted]
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, o: Mapping[str, Any]) -> "Generation":
        adopted = o.get("adopted")
        return cls(
            gen=int(o.get("gen", 0)),
            pid=_opt_int(o.get("pid")),
            lifecycle=str(o.get("lifecycle", "")),
            since_unix_ms=_opt_int(o.get("since_unix_ms")),
            superseded=bool(o.get("superseded", False)),
            offsets=dict(o.get("offsets") or {}),
            discarded=int(o.get("discarded", 0) or 0),
            pending_input=int(o.get("pending_input", 0) or 0),
            containment=o.get("containment"),
            adopted=Adopted.from_json(adopted) if isinstance(adopted, Mapping) else None,
            raw=dict(o),
        )


@dataclass(frozen=True)
class Session:
    """A session as ``list`` (and, with ``recent_ends`` and ``spec``, ``get``) reports it."""

    name: str
    state: str
    current: Optional[int]
    restarts: int
    last_end: Optional[End]
    generations: Tuple[Generation, ...]
    recent_ends: Tuple[End, ...] = ()
    spec: Optional[Mapping[str, Any]] = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    #: Why its current generation has not started (its ``depends_on``), if it waits.
    waiting: Optional[str] = None

    @property
    def failed(self) -> bool:
        """Whether the session is at rest in the ``failed`` state."""
        return self.state == "failed"

    @classmethod
    def from_json(cls, o: Mapping[str, Any]) -> "Session":
        last = o.get("last_end")
        spec = o.get("spec")
        name = str(o.get("name", ""))
        return cls(
            name=name,
            state=str(o.get("state", "")),
            current=_opt_int(o.get("current")),
            restarts=int(o.get("restarts", 0) or 0),
            last_end=End.from_json(last, name) if isinstance(last, Mapping) else None,
            generations=tuple(Generation.from_json(g) for g in o.get("generations") or ()),
            recent_ends=tuple(End.from_json(e, name) for e in o.get("recent_ends") or ()),
            waiting=o.get("waiting") if isinstance(o.get("waiting"), str) else None,
            spec=dict(spec) if isinstance(spec, Mapping) else None,
            raw=dict(o),
        )


# ---- events -------------------------------------------------------------------------


@dataclass(frozen=True)
class Spawned:
    """A generation's process started."""

    session: str
    gen: int
    pid: int


@dataclass(frozen=True)
class Output:
    """Bytes a generation wrote: ``data`` exactly as read, never decoded.

    ``stream`` is ``stdout``/``stderr`` (pipes) or ``pty``; ``offset`` counts within that
    generation's stream, ``pos`` within the session's whole output (what ``from_pos``
    and :class:`Dropped` count in); ``t`` is when the daemon read it (Unix ms), if known.
    """

    session: str
    gen: int
    stream: str
    offset: int
    pos: int
    data: bytes
    t: Optional[int] = None


@dataclass(frozen=True)
class Exit:
    """A generation's end (its ``exited`` event): ``code`` in the shell convention
    (128+signal, ``None`` if unknown), ``signal`` a name or ``None``, and ``cause`` —
    ``exited``, ``signaled``, ``stopped``, ``killed``, ``superseded`` or ``lost``."""

    session: str
    gen: int
    code: Optional[int]
    signal: Optional[str]
    cause: str
    discarded: int = 0
    truncated: bool = False

    @classmethod
    def from_json(cls, o: Mapping[str, Any]) -> "Exit":
        return cls(
            session=str(o.get("session", "")),
            gen=int(o.get("gen", 0)),
            code=_opt_int(o.get("code")),
            signal=o.get("signal"),
            cause=str(o.get("cause", "")),
            discarded=int(o.get("discarded", 0) or 0),
            truncated=bool(o.get("truncated", False)),
        )


@dataclass(frozen=True)
class SpawnFailure:
    """A generation could not start (its ``spawn_failed`` event; its terminal event)."""

    session: str
    gen: int
    kind: str
    errno: Optional[int]
    message: str

    @classmethod
    def from_json(cls, o: Mapping[str, Any]) -> "SpawnFailure":
        err = o.get("error") or {}
        return cls(
            session=str(o.get("session", "")),
            gen=int(o.get("gen", 0)),
            kind=str(err.get("kind", "other")),
            errno=_opt_int(err.get("errno")),
            message=str(err.get("message", "")),
        )


@dataclass(frozen=True)
class StateChange:
    """The session changed state (``state`` event)."""

    session: str
    gen: Optional[int]
    state: str


@dataclass(frozen=True)
class Dropped:
    """Session output positions ``[start, end)`` this client missed: evicted from the
    daemon's replay log before it was delivered, or lost while the client reconnected."""

    session: str
    start: int
    end: int

    @property
    def missed(self) -> int:
        """How many output bytes were missed."""
        return self.end - self.start


@dataclass(frozen=True)
class InputClosedEvent:
    """The generation stopped reading its input."""

    session: str
    gen: int


@dataclass(frozen=True)
class Unkillable:
    """The generation survived SIGKILL for its ``kill_grace``; it is still tracked."""

    session: str
    gen: int


@dataclass(frozen=True)
class Demoted:
    """A lossless subscription became an ordinary one; every byte before ``pos`` was
    delivered."""

    session: str
    pos: int


@dataclass(frozen=True)
class Ready:
    """The generation's ``ready`` check passed (only for a spec with ``ready``)."""

    session: str
    gen: int


@dataclass(frozen=True)
class ReadyFailed:
    """The generation's ``ready`` check failed (``reason``: ``timed out after 60s``...);
    the process is left running."""

    session: str
    gen: int
    reason: str


@dataclass(frozen=True)
class Unhealthy:
    """The generation failed its ``live`` probe ``failures`` times in a row: it is being
    stopped (its :class:`Exit` says ``stopped``) and its restart policy counts a failure."""

    session: str
    gen: int
    failures: int


@dataclass(frozen=True)
class UnknownEvent:
    """An event this client does not know (a newer daemon's); kept as it came."""

    name: str
    raw: Mapping[str, Any]


Event = Union[
    Spawned,
    Output,
    Exit,
    SpawnFailure,
    StateChange,
    Dropped,
    InputClosedEvent,
    Unkillable,
    Demoted,
    Ready,
    ReadyFailed,
    Unhealthy,
    UnknownEvent,
]


def event_from_json(o: Mapping[str, Any], data: bytes = b"") -> Event:
    """The typed event for a decoded event line (``data``: an output frame's bytes)."""
    name = o.get("event")
    session = str(o.get("session", ""))
    gen = _opt_int(o.get("gen"))
    if name == "output":
        return Output(
            session=session,
            gen=gen or 0,
            stream=str(o.get("stream", "")),
            offset=int(o.get("offset", 0)),
            pos=int(o.get("pos", 0)),
            data=data,
            t=_opt_int(o.get("t")),
        )
    if name == "spawned":
        return Spawned(session, gen or 0, int(o.get("pid", 0)))
    if name == "exited":
        return Exit.from_json(o)
    if name == "spawn_failed":
        return SpawnFailure.from_json(o)
    if name == "state":
        return StateChange(session, gen, str(o.get("state", "")))
    if name == "dropped":
        return Dropped(session, int(o.get("from", 0)), int(o.get("to", 0)))
    if name == "input_closed":
        return InputClosedEvent(session, gen or 0)
    if name == "unkillable":
        return Unkillable(session, gen or 0)
    if name == "demoted":
        return Demoted(session, int(o.get("pos", 0)))
    if name == "ready":
        return Ready(session, gen or 0)
    if name == "ready_failed":
        return ReadyFailed(session, gen or 0, str(o.get("reason", "")))
    if name == "unhealthy":
        return Unhealthy(session, gen or 0, int(o.get("failures", 0)))
    return UnknownEvent(str(name), dict(o))
