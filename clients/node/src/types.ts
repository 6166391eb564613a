/** Typed shapes of genward's protocol (docs/protocol.md). Members keep their wire names. */

/** A duration: milliseconds, or a string such as `"5s"`, `"250ms"`, `"1m30s"`. */
export type Duration = number | string;

/** A signal: a name (`"TERM"`, `"SIGTERM"`, `"RTMIN+3"`) or a number. */
export type Signal = string | number;

/** What `hello` answers. */
export interface HelloInfo {
  protocol: number;
  version: string;
  pid: number;
  identity?: string;
  reaper?: string;
  containment?: string;
  keeper?: boolean;
  /** The process that writes the sessions' `log` files and `--output-to-stdout`. */
  log_writer?: LogWriterInfo;
  capabilities: string[];
  [more: string]: unknown;
}

/** `hello`'s `log_writer`. */
export interface LogWriterInfo {
  /** `null` until one is needed, and while one that died waits to be started again. */
  pid: number | null;
  /** How many times it was started again after dying. */
  restarts: number;
  /** Output bytes dropped because it fell behind, since the daemon started. */
  dropped_bytes: number;
}

/**
 * What `reload` did (or, with `dry_run`, would do): session names, each list in name order.
 */
export interface ReloadPlan {
  dry_run: boolean;
  /** Sessions new to the configuration: started. */
  start: string[];
  /** Sessions the configuration started and no longer has: stopped and removed. */
  stop: string[];
  /** Sessions whose spec changed: a new generation, per their `on_busy`. */
  replace: string[];
  /** Sessions whose spec changed, left running because their `on_busy` is `reject`. */
  busy: string[];
  /** Sessions not touched at all: same generation, same process. */
  unchanged: string[];
}

/**
 * Options of `spawn` (the protocol's `spawn` arguments, camelCased). A key not named here
 * (or in the objects it maps member by member: `restart`, `limits`, `log`) is refused with
 * a `TypeError`, as the daemon refuses an argument it does not know.
 */
export interface SpawnOptions {
  /** The working directory; a relative one is this process's (resolved before sending). */
  cwd?: string;
  env?: Record<string, string>;
  unsetEnv?: string[];
  clearEnv?: boolean;
  /** `true` (24×80) or a size: run in a pseudo-terminal. */
  pty?: boolean | { rows: number; cols: number };
  /** node-pty style size; implies a pseudo-terminal. */
  cols?: number;
  rows?: number;
  stderr?: 'pipe' | 'merge' | 'null';
  stopSignal?: Signal;
  grace?: Duration;
  killGrace?: Duration;
  drain?: Duration;
  onExit?: 'kill_group' | 'leave';
  onBusy?: 'replace' | 'overlap' | 'reject';
  /**
   * Restarts by the daemon itself, each a new generation (handles stay bound to theirs):
   * the policy, or its mode alone (`'on-failure'` for `{ mode: 'on-failure' }`), as the
   * CLI's `--restart` and the Python client take it.
   */
  restart?: RestartMode | RestartPolicy;
  buffer?: number;
  onRecover?: 'stop' | 'keep';
  limits?: {
    memoryMax?: number;
    pidsMax?: number;
    cpuMax?: { quotaUs: number; periodUs: number };
  };
  /**
   * Whom the process runs as: a user name or a uid. Needs a daemon running as root unless
   * it is the daemon's own identity. Names are looked up at each start (off the daemon's
   * loop): an unknown one rejects the spawn with `SpawnFailedError` naming the field.
   */
  user?: string | number;
  /** A group name or gid; the user's primary group by default. */
  group?: string | number;
  /** Supplementary groups, names or gids; `[]` for none. The user's groups by default. */
  groups?: Array<string | number>;
  /**
   * The file mode creation mask: octal digits as a string (`'027'`), or the mode as a
   * number (`0o027`), sent as its octal digits.
   */
  umask?: string | number;
  /** An absolute path of `KEY=VALUE` lines read at each start; `env` wins over it. */
  envFile?: string;
  /** Per-process limits (`setrlimit`), set in the child before it changes user. */
  rlimits?: Partial<Record<RlimitName, RlimitValue>>;
  /**
   * When a generation counts as ready: exactly one of `fd` (a newline written to that
   * descriptor, N >= 3), `output` (a line of output containing the text), `tcp`
   * (`"HOST:PORT"` accepting), `unix` (a socket path accepting), `command` (argv exiting 0);
   * `timeout` (default 60s), `interval` between probes (default 1s).
   */
  ready?: ReadyCheck;
  /** Sessions that must be `ready`, `started` or `completed` before a generation starts. */
  dependsOn?: Record<string, 'ready' | 'started' | 'completed'>;
  /**
   * A liveness probe (exactly one of `tcp`, `unix`, `command`) run every `interval`
   * (default 10s); after `failures` (default 3) in a row the generation is stopped as
   * unhealthy and its restart policy applies.
   */
  live?: LiveCheck;
  /**
   * Also write the session's output (stdout and stderr, every generation's) to this file,
   * appended and rotated by the daemon's log writer.
   */
  log?: LogOptions;
}

/** When the daemon restarts a session whose process ended on its own. */
export type RestartMode = 'never' | 'on-failure' | 'always';

/** A spawn's `restart` policy (see `SpawnOptions.restart`). */
export interface RestartPolicy {
  mode: RestartMode;
  initial?: Duration;
  max?: Duration;
  resetAfter?: Duration;
  maxRestarts?: number;
}

/** A spawn's `log` file (see `SpawnOptions.log`). */
export interface LogOptions {
  /** An absolute path in a directory that exists; created mode 0640 if missing. */
  path: string;
  /** Rotate before the file would grow past this many bytes (default 10 MiB, 4096 to 1 TiB). */
  maxSize?: number;
  /** Rotated files kept: `path.1` … `path.N` (default 5, at most 1000; 0 keeps none). */
  keep?: number;
}

/** A spawn's `ready` check (see `SpawnOptions.ready`). */
export interface ReadyCheck {
  fd?: number;
  output?: string;
  tcp?: string;
  unix?: string;
  command?: string[];
  timeout?: Duration;
  interval?: Duration;
}

/** A spawn's `live` probe (see `SpawnOptions.live`). */
export interface LiveCheck {
  tcp?: string;
  unix?: string;
  command?: string[];
  interval?: Duration;
  failures?: number;
}

/** The resources `rlimits` may limit, with `setrlimit`'s units. */
export type RlimitName =
  | 'as'
  | 'core'
  | 'cpu'
  | 'data'
  | 'fsize'
  | 'locks'
  | 'memlock'
  | 'msgqueue'
  | 'nice'
  | 'nofile'
  | 'nproc'
  | 'rss'
  | 'rtprio'
  | 'rttime'
  | 'sigpending'
  | 'stack';

/** One limit's bound: a number, or no limit. */
export type RlimitBound = number | 'infinity';

/** A limit: one bound for soft and hard alike, or each. */
export type RlimitValue = RlimitBound | { soft: RlimitBound; hard: RlimitBound };

/** How a generation ended (its `exited` event). */
export interface ExitInfo {
  session: string;
  gen: number;
  /** Exit status in shell convention (128+signal); `null` if unknown (cause `lost`). */
  code: number | null;
  /** The signal's name (`"SIGTERM"`) or `null`. */
  signal: string | null;
  /** `exited`, `signaled`, `stopped`, `killed`, `superseded` or `lost`. */
  cause: string;
  discarded?: number;
  truncated?: boolean;
}

/** How a generation ended, as `list`/`get` report it (`last_end`, `recent_ends`). */
export interface EndSummary {
  gen: number;
  /** `exited`, `signaled`, `stopped`, `killed`, `superseded`, `lost`, or `spawn_failed`. */
  cause: string;
  /** Absent for a generation that could not start (`cause: 'spawn_failed'`). */
  code?: number | null;
  signal?: string | null;
  /** Why it could not start, for `cause: 'spawn_failed'`. */
  error?: { kind: string; errno?: number | null; message: string };
  [more: string]: unknown;
}

export interface GenerationInfo {
  gen: number;
  pid: number | null;
  lifecycle: string;
  since_unix_ms: number;
  superseded: boolean;
  offsets: Record<string, number>;
  discarded: number;
  pending_input: number;
  containment?: string;
  adopted?: { since_unix_ms: number; io_lost: boolean; verified: boolean };
  [more: string]: unknown;
}

/** One session as `list` reports it. */
export interface SessionInfo {
  name: string;
  /** `starting`, `running`, `stopping`, `exiting`, `backoff`, `stopped`, `exited`, `failed`, `removing`, `removed`. */
  state: string;
  current: number | null;
  restarts: number;
  last_end: EndSummary | null;
  generations: GenerationInfo[];
  [more: string]: unknown;
}

/** One session as `get` reports it: `list`'s entry plus its recent ends and its spec. */
export interface SessionDetail extends SessionInfo {
  recent_ends: EndSummary[];
  spec: Record<string, unknown>;
}

/** A range of session output positions `[from, to)` this client missed. */
export interface DroppedInfo {
  session: string;
  from: number;
  to: number;
  /** `true` when the gap was found while resuming after a reconnection. */
  reconnect?: boolean;
}

/** A chunk of output with where it comes from, as replay and `outputChunks()` give it. */
export interface OutputChunk {
  type: 'output';
  session: string;
  gen: number;
  stream: string;
  offset: number;
  pos: number;
  t?: number;
  data: Buffer;
}

/** Any other event, as the daemon sent it (`spawned`, `exited`, `state`, `dropped`, ...). */
export interface EventRecord {
  type: 'event';
  event: string;
  session?: string;
  gen?: number;
  [more: string]: unknown;
}

/** A generation's `ready` check passed (handle event `ready`). */
export interface ReadyInfo {
  session: string;
  gen: number;
}

/** A generation's `ready` check failed; the process is left running (handle event `ready_failed`). */
export interface ReadyFailedInfo {
  session: string;
  gen: number;
  /** e.g. `timed out after 60s`, `exited before it was ready`. */
  reason: string;
}

/**
 * A generation failed its `live` probe `failures` times in a row and is being stopped
 * (handle event `unhealthy`); its `exit` follows with cause `stopped`.
 */
export interface UnhealthyInfo {
  session: string;
  gen: number;
  failures: number;
}

/** Where a replay starts: at most one of these. */
export interface ReplayOptions {
  fromStart?: boolean;
  tail?: number;
  fromPos?: number;
  fromGen?: number;
  /** Keep following after the retained records (default: end after them). */
  follow?: boolean;
  lossless?: boolean;
}

/** Something that can be undone, as node-pty's `IDisposable`. */
export interface Disposable {
  dispose(): void;
}
