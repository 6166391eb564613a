"""What the synchronous and the asyncio client share: request ids and pending answers,
the sessions a connection follows and how far, routing events to the handle of their
generation, and what a reconnection sends again. No I/O here: the two clients supply
futures, the transport and how callbacks and waiters are woken.

Callers of the ``_Engine`` methods hold the client's lock (the sync client) or run on
its event loop (the asyncio client).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import logging
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Set, Tuple

from ._wire import MAX_LINE, PROTOCOL, REQUIRED_CAPABILITIES, encode_request
from .errors import (
    ConnectionLost,
    DaemonError,
    IncompatibleDaemon,
    Limit,
    NoSuchSession,
    ProtocolError,
    SpawnFailed,
    error_from_response,
)
from .types import (
    Dropped,
    Event,
    Exit,
    Output,
    ServerInfo,
    Spawned,
    SpawnFailure,
    event_from_json,
)

log = logging.getLogger("genward")

#: Requests that may be sent again after a reconnection when their answer was lost:
#: asking them twice is the same as asking once.
_RETRYABLE = frozenset({"hello", "list", "get", "wait", "subscribe", "unsubscribe"})

#: Output a handle keeps for iteration (and for its first ``on_data`` listener) before
#: it discards the oldest, by default.
DEFAULT_KEEP = 16 << 20


class _Pending:
    __slots__ = ("op", "session", "line", "fut", "sent", "hook", "on_error")

    def __init__(
        self,
        op: str,
        line: bytes,
        fut: Any,
        hook: Optional[Callable[[Dict[str, Any]], Any]],
        on_error: Optional[Callable[[BaseException], None]],
        session: Optional[str] = None,
    ):
        self.op = op
        #: The session a ``subscribe`` is for: a reconnection sends it as the session's
        #: one subscription again instead of a second one.
        self.session = session
        self.line = line
        self.fut = fut
        self.sent = False
        self.hook = hook
        self.on_error = on_error


class _Stream:
    """Events waiting for an iterator, bounded by ``cap`` bytes of output."""

    __slots__ = ("session", "items", "size", "cap", "done", "error", "waker", "lossy", "readers")

    def __init__(self, session: str, cap: int, lossy: bool):
        self.session = session
        self.items: Deque[Event] = collections.deque()
        self.size = 0
        self.cap = cap
        self.done = False
        self.error: Optional[BaseException] = None
        self.waker: Any = None
        #: Whether output beyond the cap (and a read's worth more) is discarded.
        self.lossy = lossy
        #: Who iterates it now (a thread, or a task), and how many times over.
        self.readers: Dict[Any, int] = {}

    def push(self, ev: Event) -> None:
        self.items.append(ev)
        if isinstance(ev, Output):
            self.size += len(ev.data)
            # An iterated stream is never cut: its reader holds back instead (past the cap
            # only while a caller waits for an answer queued behind its output). One nobody
            # iterates never holds more than its cap: `keep` is what the caller allowed.
            if self.lossy and not self.readers and self.size > self.cap:
                self._discard_oldest()

    def _discard_oldest(self) -> None:
        start: Optional[int] = None
        end = 0
        items = self.items
        # Other events (`Spawned`, `StateChange`, ...) are kept, in order, ahead of the
        # `Dropped` that stands for the output discarded among them: stopping at the first
        # of them would discard nothing at all (a spawned handle's stream starts with
        # `Spawned`), and the stream would grow without bound.
        kept: List[Event] = []
        while self.size > self.cap and items:
            ev = items.popleft()
            if isinstance(ev, Output):
                self.size -= len(ev.data)
                if start is None:
                    start = ev.pos
                end = ev.pos + len(ev.data)
            elif isinstance(ev, Dropped):
                if start is None:
                    start = ev.start
                end = max(end, ev.end)
            else:
                kept.append(ev)
        if start is not None:
            kept.append(Dropped(self.session, start, end))
        items.extendleft(reversed(kept))

    def pop(self) -> Optional[Event]:
        if not self.items:
            return None
        ev = self.items.popleft()
        if isinstance(ev, Output):
            self.size -= len(ev.data)
        return ev

    @property
    def full(self) -> bool:
        return self.size >= self.cap

    def add_reader(self, owner: Any) -> None:
        self.readers[owner] = self.readers.get(owner, 0) + 1

    def remove_reader(self, owner: Any) -> None:
        n = self.readers.get(owner, 0) - 1
        if n > 0:
            self.readers[owner] = n
        else:
            self.readers.pop(owner, None)


#: The most events a follow remembers since its last byte, to recognise them when a
#: resumed subscription sends them again: events with no output between them would grow
#: the list without bound (past it, the oldest would be delivered again).
_SINCE_MAX = 1024


class _Follow:
    """A session this connection subscribes to, and the next output position it expects."""

    __slots__ = ("session", "next_pos", "start", "extra", "sink", "since", "again")

    def __init__(self, session: str, start: Dict[str, Any], extra: Dict[str, Any], sink: Optional[_Stream]):
        self.session = session
        self.next_pos: Optional[int] = None
        self.start = start
        self.extra = extra
        self.sink = sink
        #: The events delivered since the last byte (as sent, their JSON): a subscription
        #: resumed after that byte (or, none seen, from the same start) is sent them again.
        self.since: List[str] = []
        #: Those still to be recognised on the resumed connection, in order.
        self.again: List[str] = []

    def resumed(self) -> None:
        """The session is followed again on a new connection, from ``resume_args``."""
        self.again = list(self.since)

    def seen_before(self, msg: Mapping[str, Any]) -> bool:
        """Whether the event ``msg`` (not output, not ``dropped``) was delivered already:
        one of those sent again by a resumed subscription. Remembers it otherwise."""
        if msg.get("event") == "demoted":
            return False  # this connection's own, never sent again
        key = json.dumps(msg, sort_keys=True)
        try:
            seen = self.again.index(key)
        except ValueError:
            self.since.append(key)
            if len(self.since) > _SINCE_MAX:
                del self.since[0]
            return False
        del self.again[: seen + 1]
        return True

    def resume_args(self) -> Dict[str, Any]:
        args: Dict[str, Any] = {"op": "subscribe", "session": self.session}
        if self.next_pos is not None:
            args["from_pos"] = self.next_pos
        else:
            args.update(self.start)
        args.update(self.extra)
        return args


class ProcState:
    """Everything the client knows about one generation it spawned."""

    def __init__(self, engine: "_Engine", session: str, gen: int, pty: bool, keep: int):
        self.session = session
        self.gen = gen
        self.pty = pty
        self.pid: Optional[int] = None
        #: The PTY's size as last set through this client, if it runs in one.
        self.size: Optional[Tuple[int, int]] = None
        self.started = engine._future()
        self.exited = engine._future()
        self.exit: Optional[Exit] = None
        self.stream = _Stream(session, keep, lossy=True)
        self.unheard: Optional[_Stream] = _Stream(session, keep, lossy=True)
        self.data_listeners: List[Callable[[bytes], Any]] = []
        self.exit_listeners: List[Callable[[Exit], Any]] = []
        self.dropped_listeners: List[Callable[[Dropped], Any]] = []
        #: Gaps in the output the first ``on_data`` listener got (held for it, and cut to
        #: ``keep``) that no ``on_dropped`` listener was there to hear: the first one hears
        #: them when it is added.
        self.unreported: List[Dropped] = []
        self.wait_sent = False
        self.streams_seen: Set[str] = set()
        #: Bytes of output handed to ``on_data`` callbacks that have not run yet: while
        #: more than ``keep`` wait, the reader holds back (see ``_must_hold_back``).
        self.unrun = 0
        #: The asyncio client's tasks of ``on_data`` callbacks not done yet.
        self.data_tasks: Set[Any] = set()


class _Engine:
    """Shared state of one connection; see the module's doc."""

    def __init__(self, path: str, reconnect: bool, reconnect_timeout: float):
        self.path = path
        self.reconnect = reconnect
        self.reconnect_timeout = reconnect_timeout
        self.server: Optional[ServerInfo] = None
        self._next_id = 1
        self._pending: Dict[int, _Pending] = {}
        self._follows: Dict[str, _Follow] = {}
        self._procs: Dict[Tuple[str, int], ProcState] = {}
        self._connected = False
        self._closed = False
        self._close_error: Optional[BaseException] = None
        #: Times the connection was established again after a loss.
        self.reconnects = 0
        #: Threads (or tasks) waiting in a call of this client, and how many times over.
        self._blocked: Dict[Any, int] = {}
        #: When the last connection whose hello was answered was lost (monotonic seconds),
        #: while no later one has been answered: reconnecting gives up `reconnect_timeout`
        #: after it, however many connections are accepted and then ended before their
        #: hello is answered (a daemon refusing this client, or at its connection limit).
        self._lost_since: Optional[float] = None
        #: The pause before connecting again after such a connection.
        self._retry_delay = 0.05
        #: Whether a hello was ever answered: a first connection lost before that is not
        #: connected again (the caller of the constructor hears why).
        self._greeted = False
        #: Whether the current connection's hello was answered.
        self._answered = False
        #: The daemon's refusal of a connection (``permission_denied`` for a uid it does
        #: not allow, ``limit`` at its connection cap): an error of no request's, read
        #: before a hello was answered; kept until one is.
        self._refusal: Optional[DaemonError] = None
        #: What the current connection sent that this client cannot read, before its hello
        #: was answered: not a genward daemon (or not one this client can follow).
        self._garbled: Optional[ProtocolError] = None

    # ---- supplied by the transport ---------------------------------------------------

    def _future(self) -> Any:
        raise NotImplementedError

    def _send_bytes(self, data: bytes) -> bool:
        """Sends ``data``; ``False`` when the connection was found already gone, so that
        none of it can have been read by a daemon (the reader has not seen the end yet)."""
        raise NotImplementedError

    def _wake(self, stream: Optional[_Stream]) -> None:
        raise NotImplementedError

    def _emit(self, fn: Callable[[Any], Any], arg: Any) -> None:
        raise NotImplementedError

    def _emit_data(self, st: "ProcState", fns: List[Callable[[bytes], Any]], data: bytes) -> None:
        """Hands a chunk of output to ``fns``, counting it in ``st.unrun`` until they have
        run."""
        raise NotImplementedError

    def _callbacks_blocked(self, st: "ProcState") -> bool:
        """Whether the ``on_data`` callbacks of ``st`` are held up waiting for an answer of
        this client (which may come behind the output they have not taken)."""
        raise NotImplementedError

    def _must_hold_back(self) -> bool:
        """Whether the reader should stop reading the socket for now: a loop iterating a
        handle (or a subscription) is a full buffer behind. The daemon then holds a
        lossless follower's output back, or tells an ordinary one what it dropped. A loop
        that is itself waiting in a call of this client is not held back for: its answer
        may be behind the output it has not taken yet."""
        if self._closed:
            return False
        for follow in self._follows.values():
            if follow.sink is not None and self._holds_back(follow.sink):
                return True
        return any(
            self._holds_back(st.stream) or (st.unrun > st.stream.cap and not self._callbacks_blocked(st))
            for st in self._procs.values()
        )

    def _holds_back(self, stream: _Stream) -> bool:
        if not stream.full or stream.done:
            return False
        if stream.readers:
            return any(owner not in self._blocked for owner in stream.readers)
        return not stream.lossy  # a subscription is there to be read

    def _block(self, owner: Any) -> None:
        self._blocked[owner] = self._blocked.get(owner, 0) + 1

    def _unblock(self, owner: Any) -> None:
        n = self._blocked.get(owner, 0) - 1
        if n > 0:
            self._blocked[owner] = n
        else:
            self._blocked.pop(owner, None)

    # ---- futures -----------------------------------------------------------------------

    @staticmethod
    def _settle(fut: Any, value: Any = None, exc: Optional[BaseException] = None) -> None:
        if fut.done():
            return
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(value)

    # ---- requests ------------------------------------------------------------------------

    def _request(
        self,
        args: Mapping[str, Any],
        hook: Optional[Callable[[Dict[str, Any]], Any]] = None,
        on_error: Optional[Callable[[BaseException], None]] = None,
    ) -> Any:
        """Queues a request (``args`` holds ``op``); returns the future of its answer
        (what ``hook`` returns, else the response), failed with the daemon's error."""
        fut = self._future()
        if self._closed:
            self._settle(fut, exc=self._close_error or ConnectionLost("the client is closed"))
            return fut
        rid = self._next_id
        self._next_id += 1
        line = encode_request({"id": rid, **args})
        if len(line) - 1 > MAX_LINE:
            # The daemon would answer it with an id-less `limit` no caller could match.
            msg = f"the `{args['op']}` request is {len(line) - 1} bytes, longer than a request line's limit of {MAX_LINE}"
            self._settle(fut, exc=Limit("limit", msg))
            return fut
        op = str(args["op"])
        session = str(args["session"]) if op == "subscribe" and "session" in args else None
        p = _Pending(op, line, fut, hook, on_error, session)
        self._pending[rid] = p
        if self._connected:
            self._send_in_turn([p])
        return fut

    def _withdraw(self, fut: Any) -> None:
        """A caller gave up waiting: its request is never sent if it was not yet (sent,
        its answer is ignored when it comes)."""
        for rid, p in list(self._pending.items()):
            if p.fut is fut and not p.sent:
                del self._pending[rid]

    def _on_response(self, msg: Dict[str, Any]) -> None:
        rid = msg.get("id")
        p = self._pending.pop(rid, None) if isinstance(rid, int) else None
        if p is None:
            if msg.get("ok") is False:
                if not self._answered:
                    # Refused as it was accepted: the daemon closes the connection next.
                    self._refusal = error_from_response(msg)
                else:
                    log.warning("genward: unmatched error from the daemon: %s", msg.get("error"))
            return
        if msg.get("ok") is True:
            try:
                value = p.hook(msg) if p.hook else msg
            except BaseException as e:  # a hook refusing the answer (hello's checks)
                self._settle(p.fut, exc=e)
                return
            self._settle(p.fut, value)
        else:
            err = error_from_response(msg)
            if p.on_error:
                p.on_error(err)
            self._settle(p.fut, exc=err)

    def _check_hello(self, resp: Dict[str, Any]) -> ServerInfo:
        info = ServerInfo.from_json(resp)
        if info.protocol != PROTOCOL:
            raise IncompatibleDaemon(
                f"the daemon at {self.path} speaks protocol {info.protocol}; this client speaks {PROTOCOL}"
            )
        missing = [c for c in REQUIRED_CAPABILITIES if c not in info.capabilities]
        if missing:
            raise IncompatibleDaemon(f"the daemon at {self.path} lacks capabilities {missing}")
        self.server = info
        self._greeted = self._answered = True
        self._refusal = None
        return info

    def _unreadable(self, err: ProtocolError) -> bool:
        """The transport could not read what the connection sent: noted, as the reason of
        its end if its hello was not answered yet. Whether it is worth a warning (a
        connection that was up, connected again)."""
        if not self._answered:
            self._garbled = ProtocolError(f"{self.path} does not answer as a genward daemon: {err}")
        return self._answered

    def _gives_up(self) -> bool:
        """Whether the connection just lost is not made again: the client may not
        reconnect, or never got a hello answered (the constructor fails)."""
        return not self.reconnect or not self._greeted

    def _loss(self) -> BaseException:
        """Why the connection just lost ended, for a client that gives up on it: before
        its hello was answered, the daemon's refusal or the unreadable answer if there was
        one."""
        if self._answered:
            return ConnectionLost("the connection to the daemon was lost")
        if self._refusal is not None:
            return self._refusal
        if self._garbled is not None:
            return self._garbled
        return ConnectionLost("the connection to the daemon ended before it answered hello")

    def _not_back(self, why: BaseException) -> ConnectionLost:
        """The error of a client that gave up reconnecting, with the daemon's last refusal."""
        said = f" (it last refused the connection: {self._refusal})" if self._refusal is not None else ""
        return ConnectionLost(f"the daemon did not come back within {self.reconnect_timeout}s: {why}{said}")

    # ---- messages --------------------------------------------------------------------

    def _on_message(self, msg: Dict[str, Any]) -> None:
        if "event" in msg:
            self._on_event(msg)
        elif "ok" in msg:
            self._on_response(msg)

    def _on_event(self, msg: Dict[str, Any]) -> None:
        session = str(msg.get("session", ""))
        follow = self._follows.get(session)
        if follow is None:
            return
        ev = event_from_json(msg, msg.get("_data", b""))
        if isinstance(ev, Output):
            expected = follow.next_pos
            if expected is None and ev.offset > 0:
                # Followed from a generation's start and nothing seen yet (a reconnection
                # before its first output): what its stream wrote before was missed.
                st = self._procs.get((session, ev.gen))
                if st is not None and ev.stream not in st.streams_seen:
                    self._deliver(follow, Dropped(session, max(0, ev.pos - ev.offset), ev.pos))
            if expected is not None:
                if ev.pos + len(ev.data) <= expected and ev.data:
                    return  # seen before the connection was resumed
                if ev.pos < expected:
                    # A record that starts before the position asked for: only its rest.
                    cut = expected - ev.pos
                    ev = dataclasses.replace(ev, data=ev.data[cut:], pos=expected, offset=ev.offset + cut)
                if ev.pos > expected:
                    self._deliver(follow, Dropped(session, expected, ev.pos))
            follow.next_pos = ev.pos + len(ev.data)
            follow.since.clear()
            follow.again.clear()
        elif isinstance(ev, Dropped):
            if follow.next_pos is not None and ev.end <= follow.next_pos:
                return
            follow.next_pos = max(follow.next_pos or 0, ev.end)
        elif follow.seen_before(msg):
            # Delivered after the last byte before the connection was lost: the resumed
            # subscription (from the position after that byte) sends it again.
            return
        self._deliver(follow, ev)

    def _deliver(self, follow: _Follow, ev: Event) -> None:
        if follow.sink is not None:
            follow.sink.push(ev)
            self._wake(follow.sink)
        if isinstance(ev, Dropped):
            for (name, _), each in list(self._procs.items()):
                if name == ev.session:
                    self._proc_event(each, ev)
            return
        gen = getattr(ev, "gen", None)
        if gen is None:
            return
        st = self._procs.get((follow.session, gen))
        if st is not None:
            self._proc_event(st, ev)

    def _proc_event(self, st: ProcState, ev: Event) -> None:
        if isinstance(ev, Spawned):
            st.pid = ev.pid
            self._settle(st.started, ev.pid)
        elif isinstance(ev, SpawnFailure):
            err = SpawnFailed(ev.message, kind=ev.kind, errno=ev.errno, session=ev.session, gen=ev.gen)
            self._settle(st.started, exc=err)
            self._settle(st.exited, exc=err)
            st.stream.error = err
            self._finish(st)
            return
        elif isinstance(ev, Exit):
            self._set_exit(st, ev)
            return
        elif isinstance(ev, Output):
            st.streams_seen.add(ev.stream)
            if st.data_listeners:
                self._emit_data(st, list(st.data_listeners), ev.data)
            elif st.unheard is not None:
                st.unheard.push(ev)
        elif isinstance(ev, Dropped):
            if st.dropped_listeners:
                for on_dropped in st.dropped_listeners:
                    self._emit(on_dropped, ev)
            elif st.unheard is not None:
                # A gap in the output held for the first `on_data` listener: reported when
                # that listener gets it, in its place.
                st.unheard.push(ev)
        st.stream.push(ev)
        self._wake(st.stream)

    def _hear(self, st: ProcState, fn: Callable[[bytes], Any]) -> None:
        """``fn`` is the first ``on_data`` listener: it gets the output held for it, and
        ``on_dropped`` listeners (else the first one added later) the gaps in it, in order."""
        if st.unheard is None:
            return
        held, st.unheard = st.unheard, None
        while True:
            ev = held.pop()
            if ev is None:
                break
            if isinstance(ev, Output):
                self._emit_data(st, [fn], ev.data)
            elif isinstance(ev, Dropped):
                if st.dropped_listeners:
                    for on_dropped in st.dropped_listeners:
                        self._emit(on_dropped, ev)
                else:
                    st.unreported.append(ev)

    def _heard_dropped(self, st: ProcState, fn: Callable[[Dropped], Any]) -> None:
        """``fn`` is an ``on_dropped`` listener being added: the first one gets the gaps
        nobody heard yet (see ``_hear``)."""
        reported, st.unreported = st.unreported, []
        for ev in reported:
            self._emit(fn, ev)

    def _set_exit(self, st: ProcState, ev: Exit) -> None:
        if st.exit is not None:
            return
        st.exit = ev
        self._settle(st.started, st.pid)
        self._settle(st.exited, ev)
        st.stream.push(ev)
        for fn in st.exit_listeners:
            self._emit(fn, ev)
        self._finish(st)

    def _finish(self, st: ProcState) -> None:
        """A generation ended: its stream ends, and the session is no longer followed
        once no handle of it and no subscription needs it."""
        st.stream.done = True
        self._wake(st.stream)
        self._procs.pop((st.session, st.gen), None)
        follow = self._follows.get(st.session)
        if follow is not None and follow.sink is None and not any(n == st.session for n, _ in self._procs):
            del self._follows[st.session]
            self._request({"op": "unsubscribe", "session": st.session}, on_error=lambda e: None)

    # ---- spawn ---------------------------------------------------------------------------

    def _spawn_request(self, args: Dict[str, Any], keep: int, lossless: bool = False) -> Any:
        """Sends ``spawn``; its future resolves to the generation's :class:`ProcState`,
        registered (and its session followed from that generation) as the answer is read,
        so that none of its events can pass unseen."""
        session = str(args["session"])
        pty = args.get("pty")
        size: Optional[Tuple[int, int]] = None
        if isinstance(pty, dict):
            size = (int(pty.get("rows", 24)), int(pty.get("cols", 80)))
        elif pty:
            size = (24, 80)

        def hook(resp: Dict[str, Any]) -> ProcState:
            gen = int(resp["gen"])
            st = ProcState(self, session, gen, bool(pty), keep)
            st.size = size
            self._procs[(session, gen)] = st
            if session not in self._follows:
                extra = {"lossless": True} if lossless else {}
                self._follows[session] = _Follow(session, {"from_gen": gen}, extra, None)
                self._request(
                    {"op": "subscribe", "session": session, "from_gen": gen, **extra},
                    on_error=lambda e: self._session_gone(session, e),
                )
            return st

        return self._request(args, hook=hook)

    def _attach_state(self, session: str, gen: int, pid: Optional[int], keep: int) -> ProcState:
        """A handle's state for a generation this client did not spawn (it runs
        already): followed from that generation's first retained record."""
        st = self._procs.get((session, gen))
        if st is not None:
            return st
        st = ProcState(self, session, gen, False, keep)
        st.pid = pid
        self._settle(st.started, pid)
        self._procs[(session, gen)] = st
        if session not in self._follows:
            self._follows[session] = _Follow(session, {"from_gen": gen}, {}, None)
            self._request(
                {"op": "subscribe", "session": session, "from_gen": gen},
                on_error=self._gone_hook(session),
            )
        return st

    def _gone_hook(self, session: str) -> Callable[[BaseException], None]:
        return lambda err: self._session_gone(session, err)

    def _session_gone(self, session: str, err: BaseException) -> None:
        """Following ``session`` was refused: its handles learn why. (Not followed, it is
        not unsubscribed from as they end.)"""
        self._follows.pop(session, None)
        for (name, _), st in list(self._procs.items()):
            if name == session:
                self._settle(st.started, exc=err)
                self._settle(st.exited, exc=err)
                st.stream.error = err
                self._finish(st)

    def _wait_request(self, st: ProcState) -> None:
        """Asks the daemon for the generation's end once (answered after its exit event
        and output on this connection): a backstop for an exit event a ``dropped`` swallowed."""
        if st.wait_sent or st.exit is not None:
            return
        st.wait_sent = True

        def hook(resp: Dict[str, Any]) -> Dict[str, Any]:
            end = resp.get("end") or {}
            if end.get("event") == "exited":
                self._set_exit(st, Exit.from_json(end))
            elif end.get("event") == "spawn_failed":
                self._proc_event(st, SpawnFailure.from_json(end))
            return resp

        def on_error(err: BaseException) -> None:
            if isinstance(err, NoSuchSession):
                # The session is gone (removed, or a daemon back without its state): the
                # handle ends with that, its loops too, not only its `wait`.
                self._session_gone(st.session, err)
            self._settle(st.exited, exc=err)

        self._request({"op": "wait", "session": st.session, "gen": st.gen}, hook=hook, on_error=on_error)

    # ---- connection changes ---------------------------------------------------------

    def _on_lost(self) -> None:
        """The connection broke: answers of requests already sent are lost. Those safe to
        ask again wait for the next connection; the others fail with ConnectionLost."""
        self._connected = False
        for rid, p in list(self._pending.items()):
            if p.sent and p.op not in _RETRYABLE:
                del self._pending[rid]
                self._settle(
                    p.fut,
                    exc=ConnectionLost(f"the connection to the daemon broke before `{p.op}` was answered; it may or may not have been done"),
                )
            else:
                p.sent = False

    def _on_connected(self, first: bool) -> None:
        """A (new) connection is up: says hello, follows every session again from the
        next position it expects, then sends what waited."""
        self._connected = True
        self._answered = False
        self._garbled = None
        if not first:
            self.reconnects += 1
            # Hello, then every session followed again, then what waited (in the order it
            # was asked): a `wait` must come after its session's subscription, so that its
            # answer follows the generation's output.
            again: List[_Pending] = []
            rid = self._next_id
            self._next_id += 1
            hello = _Pending("hello", encode_request({"id": rid, "op": "hello"}), self._future(), self._reconnect_hello, None)
            self._pending[rid] = hello
            again.append(hello)
            for follow in self._follows.values():
                follow.resumed()
                # A subscription asked for but not answered yet becomes the session's
                # subscription again (same request, same future): one per session.
                unanswered = next(
                    (r for r in sorted(self._pending) if self._pending[r].op == "subscribe" and self._pending[r].session == follow.session and not self._pending[r].sent),
                    None,
                )
                if unanswered is not None:
                    p = self._pending[unanswered]
                    p.line = encode_request({"id": unanswered, **follow.resume_args()})
                    again.append(p)
                    continue
                rid = self._next_id
                self._next_id += 1
                line = encode_request({"id": rid, **follow.resume_args()})
                p = _Pending("subscribe", line, self._future(), None, self._gone_hook(follow.session), follow.session)
                self._pending[rid] = p
                again.append(p)
            waited = [self._pending[r] for r in sorted(self._pending) if not self._pending[r].sent and self._pending[r] not in again]
            self._send_in_turn(again + waited)
        else:
            self._send_in_turn([self._pending[r] for r in sorted(self._pending) if not self._pending[r].sent])

    def _send_in_turn(self, batch: List[_Pending]) -> None:
        """Sends each request of ``batch`` in order, a line at a time (a send that fails
        tells of its own bytes only, not of whole lines it carried before them). The
        connection may be found already gone (the daemon's end not read yet, or a new
        connection that died before this): the request that found it, and those behind it,
        stay unsent and go on the next connection, like requests made after the loss."""
        for p in batch:
            p.sent = True
            if not self._send_bytes(p.line):
                p.sent = False
                self._connected = False
                return

    def _reconnect_hello(self, resp: Dict[str, Any]) -> ServerInfo:
        try:
            info = self._check_hello(resp)
        except IncompatibleDaemon as e:
            self._shut(e)
            raise
        self._lost_since = None
        self._retry_delay = 0.05
        return info

    def _reconnect_start(self, now: float) -> Tuple[float, float]:
        """Where a reconnection begins: its deadline, and how long to wait before the
        first try (0 after a connection that was up; a backoff after one that ended before
        its hello was answered, so that a daemon refusing connections is not hammered)."""
        if self._lost_since is None:
            self._lost_since = now
            self._retry_delay = 0.05
            return now + self.reconnect_timeout, 0.0
        delay = self._retry_delay
        self._retry_delay = min(self._retry_delay * 2, 0.5)
        return self._lost_since + self.reconnect_timeout, delay

    def _shut(self, err: BaseException) -> None:
        """Ends the client: every pending request, handle and subscription fails with ``err``."""
        if self._closed:
            return
        self._closed = True
        self._close_error = err
        self._connected = False
        for p in self._pending.values():
            self._settle(p.fut, exc=err)
        self._pending.clear()
        for st in list(self._procs.values()):
            self._settle(st.started, exc=err)
            self._settle(st.exited, exc=err)
            _end_stream(st.stream, err)
            self._wake(st.stream)
        self._procs.clear()
        for follow in self._follows.values():
            if follow.sink is not None:
                _end_stream(follow.sink, err)
                self._wake(follow.sink)


def _end_stream(stream: _Stream, err: BaseException) -> None:
    """Ends ``stream`` with ``err``, raised to its reader once it has taken what came
    before: never a quiet end, which would read as the generation's end (or, for a
    subscription, pass unnoticed). A stream already ended (a subscription its reader
    closed, a generation that ended) keeps its own end."""
    if not stream.done:
        stream.done = True
        stream.error = err


class _ProcessView:
    """What a process handle tells about its generation, the same for the synchronous
    and the asyncio handle (both keep their :class:`ProcState` in ``_st``)."""

    _st: ProcState

    @property
    def session(self) -> str:
        return self._st.session

    @property
    def gen(self) -> int:
        return self._st.gen

    @property
    def pid(self) -> Optional[int]:
        return self._st.pid

    @property
    def rows(self) -> Optional[int]:
        """The PTY's rows as spawned or last resized through this handle (``None``
        without a PTY, or for one attached to)."""
        return self._st.size[0] if self._st.size else None

    @property
    def cols(self) -> Optional[int]:
        """The PTY's columns, as :attr:`rows`."""
        return self._st.size[1] if self._st.size else None

    @property
    def exit(self) -> Optional[Exit]:
        """How it ended, once it has."""
        return self._st.exit
