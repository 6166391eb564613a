/** Errors raised by the genward client. Each daemon refusal carries its stable `code`. */

/** A request the daemon refused: `code` is one of the protocol's stable error codes. */
export class GenwardError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = 'GenwardError';
    this.code = code;
  }
}

/**
 * `stale_generation`: the call named a generation that is no longer the session's
 * current one, so nothing was done. A handle's calls fail this way once its generation
 * was replaced (or ended): they can never reach a successor. Once the session itself was
 * removed they fail with `NoSuchSessionError` instead.
 */
export class StaleGenerationError extends GenwardError {
  constructor(message: string) {
    super('stale_generation', message);
    this.name = 'StaleGenerationError';
  }
}

/**
 * `no_such_session`: no session has that name. A handle's calls fail this way once its
 * session was removed (by `remove`, here or elsewhere), not with `StaleGenerationError`.
 */
export class NoSuchSessionError extends GenwardError {
  constructor(message: string) {
    super('no_such_session', message);
    this.name = 'NoSuchSessionError';
  }
}

/** `not_running`: the session (or the generation named) has no running process. */
export class NotRunningError extends GenwardError {
  constructor(message: string) {
    super('not_running', message);
    this.name = 'NotRunningError';
  }
}

/** `busy`: e.g. a spawn with `onBusy: 'reject'` on a session that runs a generation. */
export class BusyError extends GenwardError {
  constructor(message: string) {
    super('busy', message);
    this.name = 'BusyError';
  }
}

/** `input_closed`: the generation no longer reads its input. */
export class InputClosedError extends GenwardError {
  constructor(message: string) {
    super('input_closed', message);
    this.name = 'InputClosedError';
  }
}

/**
 * `permission_denied`: this peer or operation is not permitted — e.g. a daemon refusing a
 * connection from a uid it does not allow (the message says how: `--allow-uid`).
 */
export class PermissionDeniedError extends GenwardError {
  constructor(message: string) {
    super('permission_denied', message);
    this.name = 'PermissionDeniedError';
  }
}

/** `limit`: a limit of the daemon was hit (its connections, queued input, a request's size, ...). */
export class LimitError extends GenwardError {
  constructor(message: string) {
    super('limit', message);
    this.name = 'LimitError';
  }
}

/** `no_config`: `reload` on a daemon started without `--config`. */
export class NoConfigError extends GenwardError {
  constructor(message: string) {
    super('no_config', message);
    this.name = 'NoConfigError';
  }
}

/**
 * `bad_config`: the configuration cannot be loaded or applied; nothing was changed. The
 * message says where: `file:line:column: field: problem`.
 */
export class BadConfigError extends GenwardError {
  constructor(message: string) {
    super('bad_config', message);
    this.name = 'BadConfigError';
  }
}

/** Why a program could not start: `kind` is `not_found`, `permission_denied`, `other` or `cancelled`. */
export interface SpawnFailure {
  kind: string;
  errno?: number | null;
  message: string;
}

/**
 * The generation could not start: the spawn was accepted (and numbered `gen`) but its
 * `spawn_failed` event names the cause, e.g. `kind: 'not_found'`.
 */
export class SpawnFailedError extends GenwardError {
  readonly session: string;
  readonly gen: number;
  readonly kind: string;
  readonly errno: number | null;
  readonly reason: SpawnFailure;
  constructor(session: string, gen: number, reason: SpawnFailure) {
    super('spawn_failed', `${session} gen ${gen} could not start (${reason.kind}): ${reason.message}`);
    this.name = 'SpawnFailedError';
    this.session = session;
    this.gen = gen;
    this.kind = reason.kind;
    this.errno = reason.errno ?? null;
    this.reason = reason;
  }
}

/** The connection to the daemon was lost before this request was answered. */
export class ConnectionLostError extends Error {
  constructor(message = 'lost the connection to the genward daemon') {
    super(message);
    this.name = 'ConnectionLostError';
  }
}

/**
 * No daemon could be reached at the socket: nothing there (`ENOENT`), nothing listening
 * (`ECONNREFUSED`), or no answer to `hello` in time (`ETIMEDOUT`). `code` is the system's.
 */
export class NoDaemonError extends Error {
  readonly code: string;
  readonly socket: string;
  constructor(socket: string, code: string, message: string) {
    super(message);
    this.name = 'NoDaemonError';
    this.code = code;
    this.socket = socket;
  }
}

/** A generation that will never be ready: its readiness failed, or it ended first. */
export class ReadinessError extends Error {
  /** The event that says why (`ready_failed`, `exited` or `spawn_failed`). */
  readonly event: { event: string; [more: string]: unknown };
  constructor(message: string, event: { event: string; [more: string]: unknown }) {
    super(message);
    this.name = 'ReadinessError';
    this.event = event;
  }
}

/** The daemon said something this client cannot follow (out of step, wrong protocol). */
export class ProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProtocolError';
  }
}

/** The typed error for one refusal, from its wire `error` member. */
export function errorFromWire(err: { code?: unknown; message?: unknown } | undefined): GenwardError {
  const code = typeof err?.code === 'string' ? err.code : 'internal';
  const message = typeof err?.message === 'string' ? err.message : code;
  switch (code) {
    case 'stale_generation':
      return new StaleGenerationError(message);
    case 'no_such_session':
      return new NoSuchSessionError(message);
    case 'not_running':
      return new NotRunningError(message);
    case 'busy':
      return new BusyError(message);
    case 'input_closed':
      return new InputClosedError(message);
    case 'permission_denied':
      return new PermissionDeniedError(message);
    case 'limit':
      return new LimitError(message);
    case 'no_config':
      return new NoConfigError(message);
    case 'bad_config':
      return new BadConfigError(message);
    default:
      return new GenwardError(code, message);
  }
}
