"""The synchronous client: a connection served by a reader thread, handles shaped like
node-pty's, and subscriptions for replay."""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

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


def _connect(path: str, timeout: Optional[float]) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(path)
        s.settimeout(None)
    except FileNotFoundError:
        s.close()
        raise NoDaemon(f"no daemon at {path}: start one with `genward daemon` (or set GENWARD_SOCKET)") from None
    except ConnectionRefusedError:
        s.close()
        raise NoDaemon(f"no daemon listens at {path}") from None
    except OSError as e:
        s.close()
        raise NoDaemon(f"cannot connect to {path}: {e}") from None
    return s


def _result(fut: Any, timeout: Optional[float]) -> Any:
    try:
        return fut.result(timeout)
    except Exception as e:  # concurrent.futures.TimeoutError is not TimeoutError before 3.11
        if isinstance(e, TimeoutError) or type(e).__name__ == "TimeoutError":
            raise TimeoutError("no answer from the daemon in time") from None
        raise


class Client(_Engine):
    """A connection to the genward daemon.

    ``Client()`` connects to the default socket (``GENWARD_SOCKET``, else the state
    directory's ``genward.sock``, as the command line does), says ``hello`` and checks the
    protocol version and capabilities. Requests may be made from any thread; they are
    pipelined on the one connection and matched to their answers by id.

    When the connection breaks (the daemon restarted, crashed, or was upgraded by a new
    program that closed it) and ``reconnect`` is true, the client connects again for up
    to ``reconnect_timeout`` seconds and follows every session again from the last output
    position it saw: nothing is delivered twice, and what it can no longer get is reported
    as :class:`Dropped`. Requests sent meanwhile wait for the new connection; a request
    already sent whose answer was lost fails with :class:`ConnectionLost` unless asking
    again is harmless (``list``, ``get``, ``wait``...).

    Callbacks (``on_data``, ``on_exit``, ``on_dropped``) run in order on one thread of the
    client's own, never the caller's; they may call the client.
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
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._decoder = Decoder()
        self._callbacks: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        #: Subscriptions made through this client, open: each has a connection of its
        #: own, which `close` ends too (their readers would wait forever otherwise).
        self._subscriptions: "set[Subscription]" = set()
        self._sock: Optional[socket.socket] = _connect(self.path, timeout)
        with self._lock:
            self._on_connected(first=True)
        self._reader = threading.Thread(target=self._run, name="genward-reader", daemon=True)
        self._reader.start()
        self._cb_thread = threading.Thread(target=self._run_callbacks, name="genward-callbacks", daemon=True)
        self._cb_thread.start()
        try:
            self._call({"op": "hello"}, hook=self._check_hello)
        except TimeoutError:
            self.close()
            # Something listens there, but no daemon this client can talk to answers.
            raise NoDaemon(f"no answer to hello from {self.path} within {timeout}s") from None
        except BaseException:
            self.close()
            raise

    @classmethod
    def connect(
        cls,
        path: Optional[str] = None,
        *,
        timeout: Optional[float] = 10.0,
        reconnect: bool = True,
        reconnect_timeout: float = 30.0,
    ) -> "Client":
        """Same as ``Client(path, ...)``."""
        return cls(path, timeout=timeout, reconnect=reconnect, reconnect_timeout=reconnect_timeout)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- transport ---------------------------------------------------------------------

    def _future(self) -> Any:
        import concurrent.futures

        return concurrent.futures.Future()

    def _send_bytes(self, data: bytes) -> bool:
        sock = self._sock
        if sock is None:
            return False
        try:
            sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            # The daemon's end is closed: no byte of this reaches it (and a line cut short
            # is never acted on). The reader sees the end and takes it from there.
            return False
        except OSError:
            pass  # the reader sees the connection end and takes it from there
        return True

    def _wake(self, stream: Optional[_Stream]) -> None:
        self._cond.notify_all()

    def _emit(self, fn: Callable[[Any], Any], arg: Any) -> None:
        self._callbacks.put((fn, arg))

    def _emit_data(self, st: ProcState, fns: List[Callable[[bytes], Any]], data: bytes) -> None:
        st.unrun += len(data)
        self._callbacks.put((self._run_data, (st, fns, data)))

    def _run_data(self, item: Any) -> None:
        st, fns, data = item
        try:
            for fn in fns:
                try:
                    fn(data)
                except Exception:
                    log.exception("genward: a callback raised")
        finally:
            with self._lock:
                st.unrun -= len(data)
                self._cond.notify_all()

    def _callbacks_blocked(self, st: ProcState) -> bool:
        cb = getattr(self, "_cb_thread", None)
        return cb is not None and cb.ident in self._blocked

    def _flush_callbacks(self, timeout: float = 10.0) -> None:
        """Returns once the callbacks queued so far have run (unless called from one)."""
        if threading.current_thread() is self._cb_thread or not self._cb_thread.is_alive():
            return
        done = threading.Event()
        self._callbacks.put((lambda _: done.set(), None))
        done.wait(timeout)

    def _run_callbacks(self) -> None:
        while True:
            item = self._callbacks.get()
            if item is None:
                return
            fn, arg = item
            try:
                fn(arg)
            except Exception:
                log.exception("genward: a callback raised")

    def _run(self) -> None:
        while True:
            sock = self._sock
            data = b""
            if sock is not None:
                try:
                    data = sock.recv(1 << 20)
                except OSError:
                    data = b""
            if data:
                try:
                    msgs = self._decoder.feed(data)
                except ProtocolError as e:
                    with self._lock:
                        warn = self._unreadable(e) and not self._gives_up()
                    if warn:
                        log.warning("genward: %s; connecting again", e)
                    msgs = None
                if msgs is not None:
                    with self._lock:
                        for m in msgs:
                            self._on_message(m)
                        self._hold_back()
                    continue
            with self._lock:
                if self._closed:
                    return
                self._drop_socket()
                self._on_lost()
                if self._gives_up():
                    self._shut(self._loss())
                    self._callbacks.put(None)
                    return
            if not self._reconnect_loop():
                return

    def _hold_back(self) -> None:
        while self._must_hold_back():
            self._cond.wait(0.5)

    def _waiting(self, fut: Any, timeout: Optional[float]) -> Any:
        """``_result``, with this thread counted as waiting (see ``_must_hold_back``)."""
        me = threading.get_ident()
        with self._lock:
            self._block(me)
            self._cond.notify_all()
        try:
            return _result(fut, timeout)
        except TimeoutError:
            with self._lock:
                self._withdraw(fut)
            raise
        finally:
            with self._lock:
                self._unblock(me)

    def _drop_socket(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def _reconnect_loop(self) -> bool:
        with self._lock:
            deadline, pause = self._reconnect_start(time.monotonic())
        if pause:
            time.sleep(pause)
        delay = 0.05
        while True:
            with self._lock:
                if self._closed:
                    return False
            try:
                if time.monotonic() >= deadline:
                    raise NoDaemon(f"connections to {self.path} kept ending before the daemon said hello")
                sock = _connect(self.path, self.timeout)
            except NoDaemon as e:
                if time.monotonic() >= deadline:
                    with self._lock:
                        self._shut(self._not_back(e))
                    self._callbacks.put(None)
                    return False
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
                continue
            with self._lock:
                if self._closed:
                    sock.close()
                    return False
                self._sock = sock
                self._decoder = Decoder()
                self._on_connected(first=False)
            return True

    # ---- requests ----------------------------------------------------------------------

    def _call(
        self,
        args: Dict[str, Any],
        hook: Optional[Callable[[Dict[str, Any]], Any]] = None,
        timeout: Optional[float] = -1.0,
    ) -> Any:
        with self._lock:
            fut = self._request(args, hook)
        return self._waiting(fut, self.timeout if timeout == -1.0 else timeout)

    def request(self, op: str, **args: Any) -> Dict[str, Any]:
        """Sends any operation (named and spelled as in the protocol) and returns its
        response; raises the :class:`DaemonError` for a refusal."""
        resp: Dict[str, Any] = self._call({"op": op, **args})
        return resp

    def close(self) -> None:
        """Closes the connection, and those of its subscriptions. Whatever waits on them
        fails with :class:`ConnectionLost`: a handle's ``wait()``, and each loop over a
        handle or a subscription once it has taken what had arrived."""
        with self._lock:
            if self._closed:
                return
            closed = ConnectionLost("the client was closed")
            self._shut(closed)
            subs, self._subscriptions = list(self._subscriptions), set()
            sock = self._sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._cond.notify_all()
        for sub in subs:
            sub._end(closed)
        self._callbacks.put(None)
        if threading.current_thread() is not self._reader:
            self._reader.join(5)
        if threading.current_thread() is not self._cb_thread:
            self._cb_thread.join(5)  # the callbacks already queued run first
        with self._lock:
            self._drop_socket()

    @property
    def closed(self) -> bool:
        return self._closed

    # ---- operations ----------------------------------------------------------------------

    def hello(self) -> ServerInfo:
        """Asks the daemon again who it is (``server`` holds the last answer)."""
        info: ServerInfo = self._call({"op": "hello"}, hook=self._check_hello)
        return info

    def spawn(
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
    ) -> "Process":
        """Starts a new generation of ``session`` running ``argv`` and returns its handle
        once the process runs; raises :class:`SpawnFailed` (with ``kind``, ``errno`` and
        the daemon's message) if it could not start.

        ``opts`` are the protocol's spawn members: ``cwd`` (a relative one is this
        process's), ``env``, ``unset_env``, ``clear_env``, ``pty`` (``True`` or
        ``(rows, cols)``), ``stderr``, ``stop_signal``,
        ``grace``/``kill_grace``/``drain`` (ms or ``"5s"``), ``on_exit``, ``on_busy``,
        ``restart``, ``buffer``, ``on_recover``, ``limits``, ``ready``, ``depends_on``,
        ``live``. Whom it runs as is typed:
        ``user``, ``group`` (names or ids), ``groups`` (a list of them; ``[]`` for none),
        ``umask`` (``"027"`` or the mode ``0o027``), ``env_file`` (an absolute path, read
        at each start), ``rlimits`` (``{"nofile": 4096, "core": Rlimit(0, "infinity")}``).
        ``log`` (``LogFile("/var/log/app/web.log", max_size=10 << 20, keep=5)``) also
        writes the session's output to that file, appended and rotated by the daemon.
        Names and the file are looked up at the start: an unknown user raises
        :class:`SpawnFailed` naming the field. ``keep`` bounds the output
        the handle holds for its iterator: while an iterator reads it, the client stops
        reading from the daemon once ``keep`` bytes wait; while none does, the oldest
        goes first (reported to ``events()`` as :class:`Dropped`). ``lossless`` makes
        the connection follow the session losslessly (if it does not follow it already):
        the daemon then holds the process's output back rather than let this client
        miss any, however slow its loop. ``timeout`` bounds the wait for the start (a
        replacement waits for its predecessor to be gone first).
        """
        run_as = run_as_members(
            user=user, group=group, groups=groups, umask=umask, env_file=env_file, rlimits=rlimits
        )
        args = spawn_args(session, argv, {**opts, **run_as, "log": log})
        with self._lock:
            fut = self._spawn_request(args, keep, lossless)
        st: ProcState = self._waiting(fut, self.timeout)
        self._waiting(st.started, timeout)
        return Process(self, st)

    def attach(self, session: str, *, keep: int = DEFAULT_KEEP) -> "Process":
        """A handle on the session's current generation, started by anyone (another
        program, this one before it restarted): bound to that generation like one
        ``spawn`` returns; its iteration starts with the generation's retained output.
        Raises :class:`NotRunning` when nothing runs."""
        s = self.get(session)
        gen = s.current
        live = [g for g in s.generations if g.gen == gen]
        if gen is None or not live:
            raise NotRunning("not_running", f"session `{session}` has no running generation")
        with self._lock:
            st = self._attach_state(session, gen, live[0].pid, keep)
        return Process(self, st)

    def list(self) -> List[Session]:
        """Every session, typed (read a page at a time from daemons that page)."""
        if self.server and "list_pages" in self.server.capabilities:
            out: List[Session] = []
            after: Optional[str] = None
            while True:
                resp = self._call({"op": "list", "limit": 1000, "after": after})
                out.extend(Session.from_json(s) for s in resp.get("sessions", ()))
                after = resp.get("next")
                if after is None:
                    return out
        resp = self._call({"op": "list"})
        return [Session.from_json(s) for s in resp.get("sessions", ())]

    def get(self, session: str) -> Session:
        """One session in full (with ``recent_ends`` and ``spec``)."""
        return Session.from_json(self._call({"op": "get", "session": session})["session"])

    def wait(self, session: str, gen: Optional[int] = None, timeout: Optional[float] = None) -> Union[Exit, SpawnFailure]:
        """Waits until generation ``gen`` (default: the current one) has ended."""
        end = self._call({"op": "wait", "session": session, "gen": gen}, timeout=timeout)["end"]
        return SpawnFailure.from_json(end) if end.get("event") == "spawn_failed" else Exit.from_json(end)

    def wait_ready(self, session: str, gen: Optional[int] = None, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Waits until generation ``gen`` (default: the current one) is ready (its spec's
        ``ready``; without one, once it runs); returns its ``ready`` event, or raises
        :class:`NotReady` with the event saying why it never will be."""
        end = self._call({"op": "wait", "session": session, "gen": gen, "for": "ready"}, timeout=timeout)["end"]
        return ready_end(session, end)

    def stop(self, session: str, *, grace: Optional[Duration] = None, if_gen: Optional[int] = None) -> Optional[int]:
        """Stops the session's current generation (stop signal, SIGKILL after the grace);
        returns the generation stopped, if one ran."""
        args = {"op": "stop", "session": session, "if_gen": if_gen, "grace": None if grace is None else duration(grace)}
        gen: Optional[int] = self._call(args).get("gen")
        return gen

    def restart(self, session: str, *, if_gen: Optional[int] = None) -> int:
        """Replaces the current generation with a new one of the same spec; returns it."""
        return int(self._call({"op": "restart", "session": session, "if_gen": if_gen})["gen"])

    def remove(self, session: str) -> None:
        """Stops everything of the session and forgets it."""
        self._call({"op": "remove", "session": session})

    def signal(self, session: str, signal: Union[str, int], *, scope: Optional[str] = None, if_gen: Optional[int] = None) -> None:
        """Sends ``signal`` to the current generation (``scope``: leader, foreground, tree)."""
        self._call({"op": "signal", "session": session, "signal": signal, "scope": scope, "if_gen": if_gen})

    def write(self, session: str, data: Data, *, if_gen: Optional[int] = None) -> None:
        """Queues input for the current generation: ``str`` as text, bytes as they are
        (see :meth:`Process.write`)."""
        self._write({"op": "write", "session": session, "if_gen": if_gen}, data)

    def _write(self, args: Dict[str, Any], data: Data) -> None:
        """The ``write`` requests (``args``, but for the input) that carry ``data``, a
        piece at a time; one refused because the daemon's input queue is full is asked
        again once the process may have read (see :class:`RoomWait`), for at most
        ``timeout`` without room, then raises its :class:`Limit`."""
        for key, value in input_pieces(data):
            piece = {**args, key: value}
            room: Optional[RoomWait] = None
            while True:
                try:
                    self._call(piece)
                    break
                except Limit as e:
                    if not input_queue_full(e):
                        raise
                    if room is None:
                        room = RoomWait(self.timeout, time.monotonic())
                        log.debug("genward: input for %s: %s; the write waits for room", args["session"], e.message)
                    wait = room.next(time.monotonic())
                    if wait is None:
                        raise
                    time.sleep(wait)

    def upgrade(self, binary: Optional[str] = None) -> Dict[str, Any]:
        """Replaces the daemon's program in place (``binary``: an absolute path; default
        the program it was started as), keeping every session and connection; returns
        the answer (``version``, ``previous``, ``pause_ms``...)."""
        resp: Dict[str, Any] = self._call({"op": "upgrade", "binary": binary}, timeout=None)
        return resp

    def reload(self, *, dry_run: bool = False) -> ReloadPlan:
        """Reads the daemon's configuration (``genward daemon --config``) again and brings
        the sessions it started in line with it; returns what it did. With ``dry_run``
        nothing changes and the plan says what a reload would do. Raises :class:`NoConfig`
        on a daemon without a configuration, :class:`BadConfig` when it cannot be loaded
        or applied (then nothing changed)."""
        resp = self._call({"op": "reload", "dry_run": True if dry_run else None})
        return ReloadPlan.from_json(resp)

    def shutdown(self) -> None:
        """Asks the daemon to stop every session and exit."""
        self._call({"op": "shutdown"})

    def subscribe(
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
    ) -> "Subscription":
        """Follows ``session``'s events and output on a connection of its own, from
        where asked (at most one of ``from_start``, ``tail``, ``from_pos``, ``from_gen``;
        by default only what happens from now on). It follows the session's later
        generations too, until closed. A reader that falls ``buffer`` bytes behind stops
        reading: the daemon then reports what it drops (or, ``lossless``, holds the
        session's output back)."""
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
        conn = Client(self.path, timeout=self.timeout, reconnect=self.reconnect, reconnect_timeout=self.reconnect_timeout)
        sink = _Stream(session, buffer, lossy=False)
        follow = _Follow(session, start, extra, sink)
        if from_pos is not None:
            follow.next_pos = from_pos
        sub = Subscription(conn, sink, self)
        with self._lock:
            # Registered before it is answered: a `close` meanwhile ends it too.
            closed = self._closed
            if not closed:
                self._subscriptions.add(sub)
        if closed:
            conn.close()
            raise ConnectionLost("the client was closed")
        try:
            with conn._lock:
                conn._follows[session] = follow
                fut = conn._request({"op": "subscribe", "session": session, **start, **extra})
            conn._waiting(fut, self.timeout)
        except BaseException:
            sub.close()
            raise
        return sub


class Process(_ProcessView):
    """A handle on one generation of a session, shaped like node-pty's ``IPty``.

    Every call carries ``if_gen``: once the session has moved on to another generation,
    calls fail with :class:`StaleGeneration` and do nothing, so nothing meant for this
    process ever reaches its successor. Output is ``bytes`` exactly as written.
    """

    def __init__(self, client: Client, state: ProcState):
        self._client = client
        self._st = state

    def __repr__(self) -> str:
        return f"<genward.Process session={self.session!r} gen={self.gen} pid={self.pid}>"

    def _call(self, op: str, **args: Any) -> Dict[str, Any]:
        resp: Dict[str, Any] = self._client._call({"op": op, "session": self.session, "if_gen": self.gen, **args})
        return resp

    def write(self, data: Data) -> None:
        """Queues input: ``str`` as text (UTF-8), bytes as they are; a long write goes
        in pieces, in order. The daemon queues at most 1 MiB of input per generation:
        while its queue has no room, the write waits for the process to read, as a write
        to a pipe does — for at most the client's ``timeout`` without room, then raises
        :class:`Limit` (the process got a prefix of ``data``)."""
        self._client._write({"op": "write", "session": self.session, "if_gen": self.gen}, data)

    def close_input(self) -> None:
        """Closes its stdin once the queued input is written (Ctrl-D on a PTY)."""
        self._call("close_input")

    def resize(self, rows: int, cols: int, *, attached: bool = False) -> None:
        """Sets the PTY's window size (the process gets SIGWINCH). ``attached=True``: the
        size of a terminal this client shows the session in, for as long as the client is
        connected — when another client's terminal that resized it later goes, the session
        gets this size back (tmux's ``window-size latest``)."""
        self._call("resize", rows=int(rows), cols=int(cols), attached=True if attached else None)
        self._st.size = (int(rows), int(cols))

    def kill(self, signal: Union[str, int] = "TERM", *, scope: Optional[str] = None) -> None:
        """Sends ``signal`` (a name like ``"INT"`` or a number); ``scope`` ``leader``
        (default), ``foreground`` (PTY) or ``tree``."""
        self._call("signal", signal=signal, scope=scope)

    def stop(self, grace: Optional[Duration] = None) -> None:
        """Starts the stop sequence (its stop signal, SIGKILL after the grace); see
        :meth:`wait` for its end."""
        self._call("stop", grace=None if grace is None else duration(grace))

    def wait(self, timeout: Optional[float] = None) -> Exit:
        """Waits for its end; returns after every ``on_data`` and ``on_exit`` callback
        for it has run (when not called from a callback)."""
        st = self._st
        if st.exit is None:
            with self._client._lock:
                self._client._wait_request(st)
        end: Exit = self._client._waiting(st.exited, timeout)
        self._client._flush_callbacks()
        return end

    def _listen(self, listeners: List[Any], fn: Any) -> Callable[[], None]:
        with self._client._lock:
            listeners.append(fn)

        def dispose() -> None:
            with self._client._lock:
                if fn in listeners:
                    listeners.remove(fn)

        return dispose

    def on_data(self, fn: Callable[[bytes], Any]) -> Callable[[], None]:
        """Calls ``fn(data)`` for each chunk of output. The first listener also receives
        what was written before it was added (up to ``keep`` bytes: the gap before them
        goes to ``on_dropped``). Returns a function that removes it."""
        st = self._st
        with self._client._lock:
            self._client._hear(st, fn)
            return self._listen(st.data_listeners, fn)

    def on_exit(self, fn: Callable[[Exit], Any]) -> Callable[[], None]:
        """Calls ``fn(exit)`` when it ends (at once if it already has); ``exit`` has
        ``code``, ``signal`` and ``cause``."""
        with self._client._lock:
            if self._st.exit is not None:
                self._client._emit(fn, self._st.exit)
            return self._listen(self._st.exit_listeners, fn)

    def on_dropped(self, fn: Callable[[Dropped], Any]) -> Callable[[], None]:
        """Calls ``fn(dropped)`` when output positions were missed (the daemon evicted
        them before they reached this client, or they passed while it reconnected, or
        the handle let them go, past ``keep``, before its first ``on_data`` listener
        came: the first ``on_dropped`` listener also gets those not heard yet)."""
        with self._client._lock:
            self._client._heard_dropped(self._st, fn)
            return self._listen(self._st.dropped_listeners, fn)

    def events(self, timeout: Optional[float] = None) -> Iterator[Event]:
        """Its events in order — :class:`Output`, :class:`Dropped`, state changes —
        ending with its :class:`Exit`. ``timeout``: the longest wait for the next one
        (``TimeoutError``)."""
        return _iterate(self._client, self._st.stream, timeout)

    def __iter__(self) -> Iterator[bytes]:
        """Its output, chunk by chunk, until it ends."""
        for ev in self.events():
            if isinstance(ev, Output):
                yield ev.data

    def read_all(self, timeout: Optional[float] = None) -> bytes:
        """All its (remaining) output, once it has ended."""
        return b"".join(ev.data for ev in self.events(timeout) if isinstance(ev, Output))


def _iterate(client: Client, stream: _Stream, timeout: Optional[float]) -> Iterator[Event]:
    with client._lock:
        stream.add_reader(threading.get_ident())
    try:
        while True:
            with client._cond:
                deadline = None if timeout is None else time.monotonic() + timeout
                while True:
                    was_full = stream.full
                    ev = stream.pop()
                    if ev is not None:
                        if was_full and not stream.full:
                            client._cond.notify_all()
                        break
                    if stream.done:
                        if stream.error is not None:
                            raise stream.error
                        return
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        raise TimeoutError("no event in time")
                    client._cond.wait(left)
            yield ev
    finally:
        with client._lock:
            stream.remove_reader(threading.get_ident())
            client._cond.notify_all()


class Subscription:
    """Events and output of a session from a replay point on, on a connection of its
    own: iterate it for :class:`Output`, :class:`Exit`, :class:`Dropped`... It resumes
    after a reconnection after the last byte and event it delivered: nothing twice. Close it when done: its iteration
    then ends. Closing the client that made it ends it too, but with
    :class:`ConnectionLost`."""

    def __init__(self, conn: Client, sink: _Stream, owner: Optional[Client] = None):
        self._conn = conn
        self._sink = sink
        self._owner = owner

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Ends it: a loop over it ends (quietly: its reader asked for it)."""
        with self._conn._lock:
            self._sink.done = True
            self._conn._cond.notify_all()
        self._forget()
        self._conn.close()

    def _end(self, err: BaseException) -> None:
        """Its client was closed: its reader gets ``err`` once it has taken what came."""
        with self._conn._lock:
            if not self._sink.done:
                self._sink.done = True
                self._sink.error = err
            self._conn._cond.notify_all()
        self._conn.close()

    def _forget(self) -> None:
        owner = self._owner
        if owner is not None:
            with owner._lock:
                owner._subscriptions.discard(self)

    @property
    def next_pos(self) -> Optional[int]:
        """The session output position after the last byte seen (for ``from_pos``)."""
        follow = self._conn._follows.get(self._sink.session)
        return follow.next_pos if follow else None

    def events(self, timeout: Optional[float] = None) -> Iterator[Event]:
        return _iterate(self._conn, self._sink, timeout)

    def __iter__(self) -> Iterator[Event]:
        return self.events()

    def until_exit(self, gen: Optional[int] = None, timeout: Optional[float] = None) -> List[Event]:
        """The events up to and including the end (``Exit`` or ``SpawnFailure``) of
        generation ``gen`` (of any generation when ``None``)."""
        out: List[Event] = []
        for ev in self.events(timeout):
            out.append(ev)
            if isinstance(ev, (Exit, SpawnFailure)) and (gen is None or ev.gen == gen):
                break
        return out
