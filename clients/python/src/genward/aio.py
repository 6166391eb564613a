"""The asyncio client: the same methods as :class:`genward.Client`, as coroutines, and
async iteration of output. Everything runs on the event loop it was connected on."""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import socket
from typing import Any, AsyncIterator, Callable, Dict, List, Mapping, Optional, Sequence, Union

from ._engine import DEFAULT_KEEP, ProcState, _Engine, _Follow, _ProcessView, _Stream
from ._wire import (
    Decoder,
    Duration,
    RoomWait,
    default_socket_path,
    duration,
    input_pieces,
    input_queue_full,
    ready_end,
    run_as_members,
    spawn_args,
)
from .errors import ConnectionLost, Limit, NoDaemon, NotRunning, ProtocolError
from .types import Dropped, Event, Exit, LogFile, Output, ReloadPlan, RlimitValue, ServerInfo, Session, SpawnFailure

log = logging.getLogger("genward")

Data = Union[bytes, bytearray, memoryview, str]


async def _open(path: str, timeout: Optional[float]) -> "tuple[asyncio.StreamReader, asyncio.StreamWriter]":
    try:
        return await asyncio.wait_for(asyncio.open_unix_connection(path, limit=1 << 22), timeout)
    except FileNotFoundError:
        raise NoDaemon(f"no daemon at {path}: start one with `genward daemon` (or set GENWARD_SOCKET)") from None
    except ConnectionRefusedError:
        raise NoDaemon(f"no daemon listens at {path}") from None
    except (OSError, asyncio.TimeoutError) as e:
        raise NoDaemon(f"cannot connect to {path}: {e}") from None


class AsyncClient(_Engine):
    """A connection to the genward daemon for asyncio programs; connect with
    ``await AsyncClient.connect()`` (or ``async with AsyncClient.connect() as c`` after
    awaiting). Its behaviour — default socket, hello checks, pipelining, reconnection
    and resumption — is :class:`genward.Client`'s.

    Callbacks run on the event loop; one that returns an awaitable has it scheduled as a
    task.
    """

    def __init__(
        self,
        path: Optional[str] = None,
        *,
        timeout: Optional[float] = 10.0,
        reconnect: bool = True,
        reconnect_timeout: float = 30.0,
    ):
        super().__init__(path or default_socket_path(), reconnect, reconnect_timeout)
        self.timeout = timeout
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._task: Optional["asyncio.Task[None]"] = None
        self._decoder = Decoder()
        self._user_closed = False
        self._progress = asyncio.Event()
        self._tasks: "set[asyncio.Task[Any]]" = set()
        #: Subscriptions made through this client, open: `close` ends them too.
        self._subscriptions: "set[AsyncSubscription]" = set()
        #: The first connection's socket, duplicated, written to directly until its hello
        #: is answered (see `_start`).
        self._first: Optional[socket.socket] = None

    @classmethod
    async def connect(
        cls,
        path: Optional[str] = None,
        *,
        timeout: Optional[float] = 10.0,
        reconnect: bool = True,
        reconnect_timeout: float = 30.0,
    ) -> "AsyncClient":
        """Connects, says hello and checks the daemon's protocol and capabilities."""
        self = cls(path, timeout=timeout, reconnect=reconnect, reconnect_timeout=reconnect_timeout)
        await self._start()
        return self

    async def _start(self) -> None:
        if self._user_closed:
            raise ConnectionLost("the client was closed")
        self._reader, self._writer = await _open(self.path, self.timeout)
        # A daemon refusing this client says why as it accepts the connection, and closes
        # it. A write the transport finds refused closes it with what it had not read
        # yet: the hello is written past it, so that the reader still reads the refusal.
        conn = self._writer.get_extra_info("socket")
        if conn is not None:
            self._first = socket.socket(fileno=os.dup(conn.fileno()))
            self._first.setblocking(False)
        self._on_connected(first=True)
        self._task = asyncio.get_running_loop().create_task(self._run())
        try:
            await self._call({"op": "hello"}, hook=self._check_hello)
        except TimeoutError:
            await self.close()
            # Something listens there, but no daemon this client can talk to answers.
            raise NoDaemon(f"no answer to hello from {self.path} within {self.timeout}s") from None
        except BaseException:
            await self.close()
            raise
        finally:
            first, self._first = self._first, None
            if first is not None:
                first.close()

    async def __aenter__(self) -> "AsyncClient":
        # `async with AsyncClient(path) as c:` connects here, as `Client(path)` does.
        if self._task is None:
            await self._start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # ---- transport ---------------------------------------------------------------------

    def _future(self) -> Any:
        fut = asyncio.get_running_loop().create_future()
        # Nobody need await a handle's end or an unsubscribe's answer: mark failures seen.
        fut.add_done_callback(_consume)
        return fut

    def _send_bytes(self, data: bytes) -> bool:
        w = self._writer
        first = self._first
        if first is not None and w is not None and w.transport.get_write_buffer_size() == 0:
            try:
                sent = first.send(data)
            except BlockingIOError:
                sent = 0
            except OSError:
                return False  # refused: what the daemon said is left for the reader
            if sent == len(data):
                return True
            if sent > 0:
                w.write(data[sent:])
                return True  # some of it went out: the rest follows, or the reader sees why
        if w is None or w.is_closing():
            # The transport failed already (its loss reaches the reader later): it would
            # drop this without a word.
            return False
        idle = w.transport.get_write_buffer_size() == 0
        w.write(data)
        # With nothing queued before it, the transport tries this write at once; closing
        # right after, that one try failed (the daemon's end is gone): no byte went out.
        # Queued behind other bytes, how much of it goes out before a failure is not told.
        return not (idle and w.is_closing())

    def _wake(self, stream: Optional[_Stream]) -> None:
        if stream is not None and stream.waker is not None:
            stream.waker.set()

    def _emit(self, fn: Callable[[Any], Any], arg: Any) -> None:
        try:
            r = fn(arg)
            if inspect.isawaitable(r):
                t = asyncio.ensure_future(r)
                self._tasks.add(t)
                t.add_done_callback(self._tasks.discard)
        except Exception:
            log.exception("genward: a callback raised")

    def _emit_data(self, st: ProcState, fns: List[Callable[[bytes], Any]], data: bytes) -> None:
        for fn in fns:
            try:
                r = fn(data)
            except Exception:
                log.exception("genward: a callback raised")
                continue
            if inspect.isawaitable(r):
                # Its task holds the chunk until it is done: counted, so that a slow one
                # holds the reader back instead of gathering tasks without bound.
                t = asyncio.ensure_future(r)
                self._tasks.add(t)
                st.unrun += len(data)
                st.data_tasks.add(t)

                def done(t: "asyncio.Future[Any]", n: int = len(data)) -> None:
                    self._tasks.discard(t)
                    st.data_tasks.discard(t)
                    st.unrun -= n
                    self._progress.set()

                t.add_done_callback(done)

    def _callbacks_blocked(self, st: ProcState) -> bool:
        return any(t in self._blocked for t in st.data_tasks)

    async def _run(self) -> None:
        while True:
            data = b""
            r = self._reader
            if r is not None:
                try:
                    data = await r.read(1 << 20)
                except (OSError, asyncio.IncompleteReadError):
                    data = b""
            if data:
                try:
                    for m in self._decoder.feed(data):
                        self._on_message(m)
                    await self._hold_back()
                    continue
                except ProtocolError as e:
                    if self._unreadable(e) and not self._gives_up():
                        log.warning("genward: %s; connecting again", e)
            if self._closed:
                return
            self._drop_transport()
            self._on_lost()
            if self._gives_up():
                self._shut(self._loss())
                return
            if not await self._reconnect_loop():
                return

    async def _hold_back(self) -> None:
        while self._must_hold_back():
            self._progress.clear()
            try:
                await asyncio.wait_for(self._progress.wait(), 0.5)
            except asyncio.TimeoutError:
                pass

    async def _waiting(self, fut: Any, timeout: Optional[float]) -> Any:
        """``_result``, with this task counted as waiting (see ``_must_hold_back``)."""
        me = asyncio.current_task()
        self._block(me)
        self._progress.set()
        try:
            return await _result(fut, timeout)
        except (TimeoutError, asyncio.CancelledError):
            self._withdraw(fut)
            raise
        finally:
            self._unblock(me)

    def _drop_transport(self) -> None:
        w, self._writer, self._reader = self._writer, None, None
        if w is not None:
            w.close()

    async def _reconnect_loop(self) -> bool:
        loop = asyncio.get_running_loop()
        deadline, pause = self._reconnect_start(loop.time())
        if pause:
            await asyncio.sleep(pause)
        delay = 0.05
        while not self._closed:
            try:
                if loop.time() >= deadline:
                    raise NoDaemon(f"connections to {self.path} kept ending before the daemon said hello")
                reader, writer = await _open(self.path, self.timeout)
            except NoDaemon as e:
                if loop.time() >= deadline:
                    self._shut(self._not_back(e))
                    return False
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.5)
                continue
            if self._closed:
                # Closed while connecting (its cancellation is lost when the connection is
                # made in the same turn, before Python 3.12): nothing more is read.
                writer.close()
                return False
            self._reader, self._writer = reader, writer
            self._decoder = Decoder()
            self._on_connected(first=False)
            return True
        return False

    # ---- requests ----------------------------------------------------------------------

    async def _call(
        self,
        args: Dict[str, Any],
        hook: Optional[Callable[[Dict[str, Any]], Any]] = None,
        timeout: Optional[float] = -1.0,
    ) -> Any:
        fut = self._request(args, hook)
        w = self._writer
        if w is not None and self._connected:
            try:
                await w.drain()
            except (OSError, RuntimeError):
                pass
        return await self._waiting(fut, self.timeout if timeout == -1.0 else timeout)

    async def request(self, op: str, **args: Any) -> Dict[str, Any]:
        """Sends any operation and returns its response (see :meth:`Client.request`)."""
        resp: Dict[str, Any] = await self._call({"op": op, **args})
        return resp

    async def close(self) -> None:
        """Closes the connection, and those of its subscriptions; see :meth:`Client.close`."""
        if self._closed:
            return
        self._user_closed = True
        closed = ConnectionLost("the client was closed")
        self._shut(closed)
        subs, self._subscriptions = list(self._subscriptions), set()
        self._drop_transport()
        for sub in subs:
            await sub._end(closed)
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    @property
    def closed(self) -> bool:
        return self._closed

    # ---- operations ----------------------------------------------------------------------

    async def hello(self) -> ServerInfo:
        info: ServerInfo = await self._call({"op": "hello"}, hook=self._check_hello)
        return info

    async def spawn(
        self,
        session: str,
        argv: Sequence[str],
        *,
        keep: int = DEFAULT_KEEP,
        lossless: bool = False,
        timeout: Optional[float] = None,
        user: Union[str, int, None] = None,
        group: Union[str, int, None] = None,
        groups: Optional[Sequence[Union[str, int]]] = None,
        umask: Union[str, int, None] = None,
        env_file: Union[str, "os.PathLike[str]", None] = None,
        rlimits: Optional[Mapping[str, RlimitValue]] = None,
        log: Union[LogFile, Mapping[str, Any], None] = None,
        **opts: Any,
    ) -> "AsyncProcess":
        """See :meth:`Client.spawn`."""
        run_as = run_as_members(
            user=user, group=group, groups=groups, umask=umask, env_file=env_file, rlimits=rlimits
        )
        args = spawn_args(session, argv, {**opts, **run_as, "log": log})
        st: ProcState = await self._waiting(self._spawn_request(args, keep, lossless), self.timeout)
        await self._waiting(st.started, timeout)
        return AsyncProcess(self, st)

    async def attach(self, session: str, *, keep: int = DEFAULT_KEEP) -> "AsyncProcess":
        """See :meth:`Client.attach`."""
        s = await self.get(session)
        gen = s.current
        live = [g for g in s.generations if g.gen == gen]
        if gen is None or not live:
            raise NotRunning("not_running", f"session `{session}` has no running generation")
        return AsyncProcess(self, self._attach_state(session, gen, live[0].pid, keep))

    async def list(self) -> List[Session]:
        if self.server and "list_pages" in self.server.capabilities:
            out: List[Session] = []
            after: Optional[str] = None
            while True:
                resp = await self._call({"op": "list", "limit": 1000, "after": after})
                out.extend(Session.from_json(s) for s in resp.get("sessions", ()))
                after = resp.get("next")
                if after is None:
                    return out
        resp = await self._call({"op": "list"})
        return [Session.from_json(s) for s in resp.get("sessions", ())]

    async def get(self, session: str) -> Session:
        return Session.from_json((await self._call({"op": "get", "session": session}))["session"])

    async def wait(self, session: str, gen: Optional[int] = None, timeout: Optional[float] = None) -> Union[Exit, SpawnFailure]:
        end = (await self._call({"op": "wait", "session": session, "gen": gen}, timeout=timeout))["end"]
        return SpawnFailure.from_json(end) if end.get("event") == "spawn_failed" else Exit.from_json(end)

    async def wait_ready(self, session: str, gen: Optional[int] = None, timeout: Optional[float] = None) -> Dict[str, Any]:
        end = (await self._call({"op": "wait", "session": session, "gen": gen, "for": "ready"}, timeout=timeout))["end"]
        return ready_end(session, end)

    async def stop(self, session: str, *, grace: Optional[Duration] = None, if_gen: Optional[int] = None) -> Optional[int]:
        args = {"op": "stop", "session": session, "if_gen": if_gen, "grace": None if grace is None else duration(grace)}
        gen: Optional[int] = (await self._call(args)).get("gen")
        return gen

    async def restart(self, session: str, *, if_gen: Optional[int] = None) -> int:
        return int((await self._call({"op": "restart", "session": session, "if_gen": if_gen}))["gen"])

    async def remove(self, session: str) -> None:
        await self._call({"op": "remove", "session": session})

    async def signal(self, session: str, signal: Union[str, int], *, scope: Optional[str] = None, if_gen: Optional[int] = None) -> None:
        await self._call({"op": "signal", "session": session, "signal": signal, "scope": scope, "if_gen": if_gen})

    async def write(self, session: str, data: Data, *, if_gen: Optional[int] = None) -> None:
        """See :meth:`Client.write`."""
        await self._write({"op": "write", "session": session, "if_gen": if_gen}, data)

    async def _write(self, args: Dict[str, Any], data: Data) -> None:
        """See :meth:`Client._write`."""
        loop = asyncio.get_running_loop()
        for key, value in input_pieces(data):
            piece = {**args, key: value}
            room: Optional[RoomWait] = None
            while True:
                try:
                    await self._call(piece)
                    break
                except Limit as e:
                    if not input_queue_full(e):
                        raise
                    if room is None:
                        room = RoomWait(self.timeout, loop.time())
                        log.debug("genward: input for %s: %s; the write waits for room", args["session"], e.message)
                    wait = room.next(loop.time())
                    if wait is None:
                        raise
                    await asyncio.sleep(wait)

    async def upgrade(self, binary: Optional[str] = None) -> Dict[str, Any]:
        """See :meth:`Client.upgrade`."""
        resp: Dict[str, Any] = await self._call({"op": "upgrade", "binary": binary}, timeout=None)
        return resp

    async def reload(self, *, dry_run: bool = False) -> ReloadPlan:
        """See :meth:`Client.reload`."""
        resp = await self._call({"op": "reload", "dry_run": True if dry_run else None})
        return ReloadPlan.from_json(resp)

    async def shutdown(self) -> None:
        await self._call({"op": "shutdown"})

    async def subscribe(
        self,
        session: str,
        *,
        from_start: bool = False,
        tail: Optional[int] = None,
        from_pos: Optional[int] = None,
        from_gen: Optional[int] = None,
        lossless: bool = False,
        demote_after: Optional[Duration] = None,
        buffer: int = 8 << 20,
    ) -> "AsyncSubscription":
        """See :meth:`Client.subscribe`."""
        start: Dict[str, Any] = {}
        if from_start:
            start["from_start"] = True
        if tail is not None:
            start["tail"] = tail
        if from_pos is not None:
            start["from_pos"] = from_pos
        if from_gen is not None:
            start["from_gen"] = from_gen
        if len(start) > 1:
            raise ValueError("give at most one of from_start, tail, from_pos, from_gen")
        extra: Dict[str, Any] = {}
        if lossless:
            extra["lossless"] = True
            if demote_after is not None:
                extra["demote_after"] = duration(demote_after)
        if self._closed:
            raise ConnectionLost("the client is closed")
        conn = await AsyncClient.connect(
            self.path, timeout=self.timeout, reconnect=self.reconnect, reconnect_timeout=self.reconnect_timeout
        )
        if self._closed:  # closed while connecting
            await conn.close()
            raise ConnectionLost("the client was closed")
        sink = _Stream(session, buffer, lossy=False)
        follow = _Follow(session, start, extra, sink)
        if from_pos is not None:
            follow.next_pos = from_pos
        conn._follows[session] = follow
        sub = AsyncSubscription(conn, sink, self)
        # Registered before it is answered: a `close` meanwhile ends it too.
        self._subscriptions.add(sub)
        try:
            await conn._call({"op": "subscribe", "session": session, **start, **extra})
        except BaseException:
            await sub.close()
            raise
        return sub


def _consume(fut: "asyncio.Future[Any]") -> None:
    if not fut.cancelled():
        fut.exception()


async def _result(fut: Any, timeout: Optional[float]) -> Any:
    try:
        return await asyncio.wait_for(asyncio.shield(fut), timeout)
    except asyncio.TimeoutError:
        raise TimeoutError("no answer from the daemon in time") from None


class AsyncProcess(_ProcessView):
    """The asyncio twin of :class:`genward.Process`: the same methods, as coroutines;
    ``async for chunk in proc`` iterates its output."""

    def __init__(self, client: AsyncClient, state: ProcState):
        self._client = client
        self._st = state

    def __repr__(self) -> str:
        return f"<genward.AsyncProcess session={self.session!r} gen={self.gen} pid={self.pid}>"

    async def _call(self, op: str, **args: Any) -> Dict[str, Any]:
        resp: Dict[str, Any] = await self._client._call({"op": op, "session": self.session, "if_gen": self.gen, **args})
        return resp

    async def write(self, data: Data) -> None:
        """See :meth:`genward.Process.write`."""
        await self._client._write({"op": "write", "session": self.session, "if_gen": self.gen}, data)

    async def close_input(self) -> None:
        await self._call("close_input")

    async def resize(self, rows: int, cols: int, *, attached: bool = False) -> None:
        await self._call("resize", rows=int(rows), cols=int(cols), attached=True if attached else None)
        self._st.size = (int(rows), int(cols))

    async def kill(self, signal: Union[str, int] = "TERM", *, scope: Optional[str] = None) -> None:
        await self._call("signal", signal=signal, scope=scope)

    async def stop(self, grace: Optional[Duration] = None) -> None:
        await self._call("stop", grace=None if grace is None else duration(grace))

    async def wait(self, timeout: Optional[float] = None) -> Exit:
        st = self._st
        if st.exit is None:
            self._client._wait_request(st)
        end: Exit = await self._client._waiting(st.exited, timeout)
        return end

    def _listen(self, listeners: List[Any], fn: Any) -> Callable[[], None]:
        listeners.append(fn)

        def dispose() -> None:
            if fn in listeners:
                listeners.remove(fn)

        return dispose

    def on_data(self, fn: Callable[[bytes], Any]) -> Callable[[], None]:
        st = self._st
        self._client._hear(st, fn)
        return self._listen(st.data_listeners, fn)

    def on_exit(self, fn: Callable[[Exit], Any]) -> Callable[[], None]:
        if self._st.exit is not None:
            self._client._emit(fn, self._st.exit)
        return self._listen(self._st.exit_listeners, fn)

    def on_dropped(self, fn: Callable[[Dropped], Any]) -> Callable[[], None]:
        self._client._heard_dropped(self._st, fn)
        return self._listen(self._st.dropped_listeners, fn)

    def events(self, timeout: Optional[float] = None) -> AsyncIterator[Event]:
        return _aiterate(self._client, self._st.stream, timeout)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for ev in self.events():
            if isinstance(ev, Output):
                yield ev.data

    async def read_all(self, timeout: Optional[float] = None) -> bytes:
        return b"".join([ev.data async for ev in self.events(timeout) if isinstance(ev, Output)])


async def _aiterate(client: AsyncClient, stream: _Stream, timeout: Optional[float]) -> AsyncIterator[Event]:
    if stream.waker is None:
        stream.waker = asyncio.Event()
    me = asyncio.current_task()
    stream.add_reader(me)
    try:
        while True:
            was_full = stream.full
            ev = stream.pop()
            if ev is not None:
                if was_full and not stream.full:
                    client._progress.set()  # lets a held-back reader go on
                yield ev
                continue
            if stream.done:
                if stream.error is not None:
                    raise stream.error
                return
            stream.waker.clear()
            try:
                await asyncio.wait_for(stream.waker.wait(), timeout)
            except asyncio.TimeoutError:
                raise TimeoutError("no event in time") from None
    finally:
        stream.remove_reader(me)
        client._progress.set()


class AsyncSubscription:
    """The asyncio twin of :class:`genward.Subscription`: ``async for ev in sub``."""

    def __init__(self, conn: AsyncClient, sink: _Stream, owner: Optional[AsyncClient] = None):
        self._conn = conn
        self._sink = sink
        self._owner = owner

    async def __aenter__(self) -> "AsyncSubscription":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Ends it: a loop over it ends (quietly: its reader asked for it)."""
        self._sink.done = True
        self._conn._wake(self._sink)
        if self._owner is not None:
            self._owner._subscriptions.discard(self)
        await self._conn.close()

    async def _end(self, err: BaseException) -> None:
        """Its client was closed: its reader gets ``err`` once it has taken what came."""
        if not self._sink.done:
            self._sink.done = True
            self._sink.error = err
        self._conn._wake(self._sink)
        await self._conn.close()

    @property
    def next_pos(self) -> Optional[int]:
        follow = self._conn._follows.get(self._sink.session)
        return follow.next_pos if follow else None

    def events(self, timeout: Optional[float] = None) -> AsyncIterator[Event]:
        return _aiterate(self._conn, self._sink, timeout)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self.events()

    async def until_exit(self, gen: Optional[int] = None, timeout: Optional[float] = None) -> List[Event]:
        out: List[Event] = []
        async for ev in self.events(timeout):
            out.append(ev)
            if isinstance(ev, (Exit, SpawnFailure)) and (gen is None or ev.gen == gen):
                break
        return out
