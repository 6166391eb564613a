"""Exceptions raised by the genward client.

Every refusal by the daemon is a :class:`DaemonError` whose ``code`` is the protocol's
stable error code; the codes a program commonly handles have their own subclass, so
``except StaleGeneration:`` reads as what it means.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Type


class GenwardError(Exception):
    """Base class of every error this library raises."""


class NoDaemon(GenwardError, ConnectionError):
    """No daemon answers at the socket path: nothing there, nothing listening, or no
    answer to ``hello`` within the client's ``timeout`` (or no default path could be
    worked out)."""


class IncompatibleDaemon(GenwardError):
    """The daemon speaks another protocol version or lacks a capability this client needs."""


class NotReady(GenwardError):
    """A generation that will never be ready: its readiness failed, or it ended first.
    ``event`` is the event that says why (``ready_failed``, ``exited``, ``spawn_failed``)."""

    def __init__(self, message: str, event: Dict[str, Any]) -> None:
        super().__init__(message)
        self.event = event


class ProtocolError(GenwardError):
    """The daemon sent something this client cannot read; the connection is closed. Raised
    when connecting to something that does not answer in genward's protocol."""


class ConnectionLost(GenwardError, ConnectionError):
    """The connection broke while a request that cannot safely be sent again was in
    flight (the daemon may or may not have acted on it), or the client gave up
    reconnecting, or it was closed."""


class DaemonError(GenwardError):
    """The daemon refused a request: ``code`` is the stable error code, ``message`` says
    why for people. A refused request changed nothing."""

    code: str = ""

    def __init__(self, code: str, message: str, response: Optional[Mapping[str, Any]] = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.response: Mapping[str, Any] = response or {}

    def __str__(self) -> str:
        return f"{self.message} ({self.code})"


class BadRequest(DaemonError):
    """``bad_request``: an ill-formed request or an invalid value."""


class UnknownOp(DaemonError):
    """``unknown_op``: the daemon knows no such operation."""


class NoSuchSession(DaemonError):
    """``no_such_session``: no session has that name."""


class Busy(DaemonError):
    """``busy``: the session runs a generation and ``on_busy`` is ``reject``, or the
    daemon is shutting down or upgrading."""


class StaleGeneration(DaemonError):
    """``stale_generation``: the handle's generation is no longer the session's current
    one (it was replaced or has ended and another started); nothing was done. Once the
    session itself was removed, a handle's calls raise :class:`NoSuchSession` instead."""


class Limit(DaemonError):
    """``limit``: a limit of the daemon was hit (queued input, sessions, waits...)."""


class PermissionDenied(DaemonError):
    """``permission_denied``: this peer or operation is not permitted."""


class NotRunning(DaemonError):
    """``not_running``: the session has no running generation to address."""


class InputClosed(DaemonError):
    """``input_closed``: the generation no longer reads its input."""


class Internal(DaemonError):
    """``internal``: a bug or unexpected system failure in the daemon."""


class UpgradeFailed(DaemonError):
    """``upgrade_failed``: an upgrade was refused or rolled back."""


class NoConfig(DaemonError):
    """``no_config``: ``reload`` on a daemon started without ``--config``."""


class BadConfig(DaemonError):
    """``bad_config``: the configuration cannot be loaded or applied; nothing was changed.
    The message says where: ``file:line:column: field: problem``."""


class SpawnFailed(DaemonError):
    """The process of a generation could not be started.

    ``kind`` is ``not_found``, ``permission_denied``, ``other`` (see ``errno``) or
    ``cancelled`` (stopped or replaced before it started); ``gen`` the generation that
    failed to start, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str = "other",
        errno: Optional[int] = None,
        session: Optional[str] = None,
        gen: Optional[int] = None,
        response: Optional[Mapping[str, Any]] = None,
    ):
        super().__init__("spawn_failed", message, response)
        self.kind = kind
        self.errno = errno
        self.session = session
        self.gen = gen

    def __str__(self) -> str:
        where = f"session {self.session!r} gen {self.gen}: " if self.session else ""
        return f"{where}{self.message} ({self.kind})"


_BY_CODE: Dict[str, Type[DaemonError]] = {
    "bad_request": BadRequest,
    "unknown_op": UnknownOp,
    "no_such_session": NoSuchSession,
    "busy": Busy,
    "stale_generation": StaleGeneration,
    "limit": Limit,
    "permission_denied": PermissionDenied,
    "not_running": NotRunning,
    "input_closed": InputClosed,
    "internal": Internal,
    "upgrade_failed": UpgradeFailed,
    "no_config": NoConfig,
    "bad_config": BadConfig,
}


def error_from_response(response: Mapping[str, Any]) -> DaemonError:
    """The exception for a failed response (``"ok": false``)."""
    err = response.get("error")
    if not isinstance(err, Mapping):
        return DaemonError("internal", f"malformed error response: {response!r}", response)
    code = str(err.get("code", "internal"))
    message = str(err.get("message", code))
    if code == "spawn_failed":
        return SpawnFailed(message, response=response)
    return _BY_CODE.get(code, DaemonError)(code, message, response)
