"""genward: drive the genward process supervisor from Python.

A synchronous :class:`Client` and an asyncio :class:`AsyncClient` with the same methods.
``spawn`` returns once the process runs, with a handle bound to that generation
(node-pty-like: ``write``, ``resize``, ``kill``, ``stop``, ``wait``, ``on_data``,
``on_exit``, iteration over output as bytes); every call it makes carries ``if_gen``, so
a handle never reaches the process that replaced it.
"""

from ._wire import PROTOCOL, default_socket_path
from .aio import AsyncClient, AsyncProcess, AsyncSubscription
from .client import Client, Process, Subscription
from .errors import (
    BadRequest,
    Busy,
    ConnectionLost,
    DaemonError,
    GenwardError,
    IncompatibleDaemon,
    InputClosed,
    Internal,
    Limit,
    NoDaemon,
    NoSuchSession,
    NotReady,
    NotRunning,
    PermissionDenied,
    ProtocolError,
    SpawnFailed,
    StaleGeneration,
    UnknownOp,
    UpgradeFailed,
)
from .types import (
    Adopted,
    Demoted,
    Dropped,
    End,
    Event,
    Exit,
    Generation,
    InputClosedEvent,
    Output,
    Rlimit,
    RlimitBound,
    RlimitValue,
    ServerInfo,
    Session,
    Spawned,
    SpawnFailure,
    StateChange,
    UnknownEvent,
    Unkillable,
)

__version__ = "0.1.0"

__all__ = [
    "PROTOCOL",
    "default_socket_path",
    "Client",
    "Process",
    "Subscription",
    "AsyncClient",
    "AsyncProcess",
    "AsyncSubscription",
    "GenwardError",
    "DaemonError",
    "BadRequest",
    "Busy",
    "ConnectionLost",
    "IncompatibleDaemon",
    "InputClosed",
    "Internal",
    "Limit",
    "NoDaemon",
    "NoSuchSession",
    "NotRunning",
    "PermissionDenied",
    "ProtocolError",
    "SpawnFailed",
    "StaleGeneration",
    "UnknownOp",
    "UpgradeFailed",
    "Adopted",
    "Demoted",
    "Dropped",
    "End",
    "Event",
    "Exit",
    "Generation",
    "InputClosedEvent",
    "Output",
    "Rlimit",
    "RlimitBound",
    "RlimitValue",
    "ServerInfo",
    "Session",
    "Spawned",
    "SpawnFailure",
    "StateChange",
    "UnknownEvent",
    "Unkillable",
]
