import { EventEmitter } from 'node:events';
import * as net from 'node:net';
import * as path from 'node:path';
import {
  ConnectionLostError,
  GenwardError,
  NoDaemonError,
  NoSuchSessionError,
  NotRunningError,
  ProtocolError,
  ReadinessError,
  errorFromWire,
} from './errors.js';
import { FrameDecoder, MAX_LINE, type Message } from './frame.js';
import { SessionHandle } from './handle.js';
import { defaultSocketPath } from './socket.js';
import type {
  Duration,
  DroppedInfo,
  EventRecord,
  HelloInfo,
  OutputChunk,
  ReloadPlan,
  ReplayOptions,
  SessionDetail,
  SessionInfo,
  SpawnOptions,
} from './types.js';

/** The protocol version this client speaks. */
export const PROTOCOL_VERSION = 1;
/** Capabilities this client needs from every daemon. */
export const REQUIRED_CAPABILITIES = ['output_frames', 'replay', 'if_gen', 'wait'];

/**
 * Operations asked again on the next connection when the one they were sent on is lost
 * before their answer: asking them twice is the same as asking once (a `wait`, for an end
 * or for readiness, only waits), whoever sends them (`waitReady`, `request`, ...).
 */
const RETRYABLE: ReadonlySet<string> = new Set(['hello', 'list', 'get', 'wait']);

export interface ConnectOptions {
  /** The daemon's socket; default: `GENWARD_SOCKET`, else the CLI's default. */
  socket?: string;
  /** Reconnect when the daemon goes away (restart, crash), resuming every subscription. Default true. */
  reconnect?: boolean;
  /** How long to keep trying to reconnect, in ms, before failing everything (default 60000). */
  reconnectTimeout?: number;
  /** Follow sessions losslessly: a slow reader holds the process's output back instead of losing it. */
  lossless?: boolean;
  /** With `lossless`: after how long without taking a byte the daemon demotes the subscription. */
  demoteAfter?: Duration;
  /** Bytes an output iterator may hold unread before the client stops reading (default 8 MiB). */
  highWaterMark?: number;
  /** Capabilities to require besides the ones this client always needs (e.g. `['pty']`). */
  capabilities?: string[];
  /** How long to wait for the daemon's answer to `hello` when connecting, in ms (default 10000). */
  connectTimeout?: number;
}

interface Pending {
  id: number;
  op: string;
  line: string;
  /** Safe to send again after a reconnection (it changes nothing, or was never sent). */
  retry: boolean;
  sent: boolean;
  /** The session it names, if any. */
  session?: string;
  resolve: (body: any) => void;
  reject: (err: unknown) => void;
  onResponse?: (body: any) => void;
  /**
   * Called with the daemon's refusal as it is read, before any later message (as
   * `onResponse`): a promise's rejection is only seen after the rest of the chunk.
   */
  onError?: (err: GenwardError) => void;
}

interface Sub {
  name: string;
  handles: Map<number, SessionHandle>;
  pendingSpawns: number;
  subscribed: boolean;
  /** The next session output position expected (last `pos` + `len` seen). */
  nextPos: number | null;
  /**
   * The events delivered since the last byte (as sent): a subscription resumed after that
   * byte (or, none seen, from the same generation) is sent them again.
   */
  since: string[];
  /** Those still to be recognised on the resumed connection, in order. */
  again: string[];
}

/**
 * The most events remembered since the last byte, to recognise them when a resumed
 * subscription sends them again (past it, the oldest would be delivered twice).
 */
const SINCE_MAX = 1024;

function openSocket(path: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const sock = net.createConnection({ path });
    const onError = (e: NodeJS.ErrnoException) => {
      sock.destroy();
      const code = e.code ?? 'EIO';
      const why =
        code === 'ENOENT'
          ? 'start one with `genward daemon` (or set GENWARD_SOCKET)'
          : code === 'ECONNREFUSED'
            ? 'nothing listens there'
            : e.message;
      reject(new NoDaemonError(path, code, `no genward daemon at ${path}: ${why}`));
    };
    sock.once('error', onError);
    sock.once('connect', () => {
      sock.off('error', onError);
      resolve(sock);
    });
  });
}

function checkHello(hello: HelloInfo, extra: string[]): void {
  if (hello.protocol !== PROTOCOL_VERSION) {
    throw new ProtocolError(`the daemon speaks protocol ${String(hello.protocol)}, this client ${PROTOCOL_VERSION}`);
  }
  const caps = Array.isArray(hello.capabilities) ? hello.capabilities : [];
  const missing = [...REQUIRED_CAPABILITIES, ...extra].filter((c) => !caps.includes(c));
  if (missing.length > 0) {
    throw new ProtocolError(`the daemon (genward ${hello.version}) lacks capabilities: ${missing.join(', ')}`);
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Protocol errors of what answered a connection's hello unreadably (not an incompatible daemon's). */
const garbled = new WeakSet<Error>();

/**
 * The keys of `SpawnOptions`, and of the objects in it that are mapped member by member.
 * Any other is refused before anything is sent: the mapping would drop it unseen (a
 * `kill_grace` for `killGrace`), where the daemon refuses an argument it does not know so
 * that a misspelt option never goes unnoticed.
 */
const SPAWN_KEYS = new Set([
  'cwd',
  'env',
  'unsetEnv',
  'clearEnv',
  'pty',
  'cols',
  'rows',
  'stderr',
  'stopSignal',
  'grace',
  'killGrace',
  'drain',
  'onExit',
  'onBusy',
  'restart',
  'buffer',
  'onRecover',
  'limits',
  'user',
  'group',
  'groups',
  'umask',
  'envFile',
  'rlimits',
  'ready',
  'dependsOn',
  'live',
  'log',
]);
const RESTART_KEYS = new Set(['mode', 'initial', 'max', 'resetAfter', 'maxRestarts']);
const LIMITS_KEYS = new Set(['memoryMax', 'pidsMax', 'cpuMax']);
const CPU_MAX_KEYS = new Set(['quotaUs', 'periodUs']);
const LOG_KEYS = new Set(['path', 'maxSize', 'keep']);

/** What a value of the wrong shape is, for a message: `an array`, `a number`, ... */
const shape = (v: unknown) => (Array.isArray(v) ? 'an array' : `a ${typeof v}`);

/** Refuses a key of `o` not in `known`, naming it (`prefix`: where `o` is, e.g. `restart.`). */
function checkKeys(o: object, known: Set<string>, prefix = ''): void {
  for (const key of Object.keys(o)) {
    if (known.has(key)) continue;
    const camel = key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
    const hint = known.has(camel) ? ` (did you mean \`${prefix}${camel}\`?)` : '';
    throw new TypeError(`spawn: unknown option \`${prefix}${key}\`${hint}`);
  }
}

/**
 * The spawn option `name`, an object of options mapped member by member, checked: absent
 * (`undefined`, or `null`, which the protocol reads as absent), or an object of known keys.
 */
function optionObject<T extends object>(name: string, v: T | null | undefined, known: Set<string>): T | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) {
    throw new TypeError(`spawn: option \`${name}\` is an object, not ${shape(v)}`);
  }
  checkKeys(v, known, `${name}.`);
  return v;
}

/** The `restart` member: a policy object, or a mode alone as the CLI and the Python client take it. */
function restartMember(r: SpawnOptions['restart'] | null): unknown {
  // Any string: the daemon judges the mode, and refuses one it does not know.
  if (typeof r === 'string') return { mode: r };
  if (r !== undefined && r !== null && (typeof r !== 'object' || Array.isArray(r))) {
    throw new TypeError(`spawn: option \`restart\` is a mode ('never', 'on-failure', 'always') or an object, not ${shape(r)}`);
  }
  const p = optionObject('restart', r, RESTART_KEYS);
  return (
    p && {
      mode: p.mode,
      initial: p.initial,
      max: p.max,
      reset_after: p.resetAfter,
      max_restarts: p.maxRestarts,
    }
  );
}

/** Maps `SpawnOptions` to the `spawn` request's members; throws a `TypeError` on a key it does not know. */
function spawnArgs(session: string, argv: string[], o: SpawnOptions): Record<string, unknown> {
  checkKeys(o, SPAWN_KEYS);
  const limits = optionObject('limits', o.limits, LIMITS_KEYS);
  const cpuMax = optionObject('limits.cpuMax', limits?.cpuMax, CPU_MAX_KEYS);
  const log = optionObject('log', o.log, LOG_KEYS);
  let pty: unknown = o.pty;
  if (o.cols !== undefined || o.rows !== undefined) {
    pty = { rows: o.rows ?? 24, cols: o.cols ?? 80 };
  }
  return {
    session,
    argv,
    // As the caller means it: the daemon would take a relative one from its own directory.
    cwd: o.cwd === undefined ? undefined : path.resolve(o.cwd),
    env: o.env,
    unset_env: o.unsetEnv,
    clear_env: o.clearEnv,
    pty: pty === false ? undefined : pty,
    stderr: o.stderr,
    stop_signal: o.stopSignal,
    grace: o.grace,
    kill_grace: o.killGrace,
    drain: o.drain,
    on_exit: o.onExit,
    on_busy: o.onBusy,
    restart: restartMember(o.restart),
    buffer: o.buffer,
    on_recover: o.onRecover,
    limits: limits && {
      memory_max: limits.memoryMax,
      pids_max: limits.pidsMax,
      cpu_max: cpuMax && { quota_us: cpuMax.quotaUs, period_us: cpuMax.periodUs },
    },
    user: o.user,
    group: o.group,
    groups: o.groups,
    umask: typeof o.umask === 'number' ? umaskDigits(o.umask) : o.umask,
    env_file: o.envFile,
    rlimits: o.rlimits,
    ready: o.ready,
    depends_on: o.dependsOn,
    live: o.live,
    log: log && { path: log.path, max_size: log.maxSize, keep: log.keep },
  };
}

/** A mode as the octal digits the protocol's `umask` takes (`0o27` → `'027'`). */
function umaskDigits(mode: number): string {
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o777) {
    throw new RangeError(`umask: ${mode} is not a mode from 0o000 to 0o777`);
  }
  return mode.toString(8).padStart(3, '0');
}

/**
 * A connection to the genward daemon. Requests are pipelined and matched by id; session
 * handles follow their sessions' events and output. When the daemon goes away the client
 * reconnects and resumes every subscription from the last position it saw, reporting any
 * gap as `dropped`.
 *
 * Events: `disconnect` (Error), `reconnect` (HelloInfo), `close`, `error` (Error),
 * `event` (every non-output event, as sent), `dropped` (DroppedInfo).
 */
export class Client extends EventEmitter {
  readonly socketPath: string;
  /** What the daemon answered to `hello` (updated on each reconnection). */
  hello!: HelloInfo;
  /** @internal */
  readonly highWaterMark: number;
  private readonly opts: ConnectOptions;
  private sock: net.Socket | null = null;
  private decoder = new FrameDecoder();
  private nextId = 1;
  private pending = new Map<number, Pending>();
  private subs = new Map<string, Sub>();
  private pausers = new Set<object>();
  /** Each running replay's end, called by `close()`: their connections are this client's too. */
  private replays = new Set<(err: unknown) => void>();
  private closed = false;
  private reconnecting: Promise<void> | null = null;
  /** Requests being gathered for one write (see `together`), else null. */
  private gathered: Pending[] | null = null;

  private constructor(opts: ConnectOptions) {
    super();
    this.opts = opts;
    this.socketPath = opts.socket ?? defaultSocketPath();
    this.highWaterMark = opts.highWaterMark ?? 8 * 1024 * 1024;
  }

  /** Connects to the daemon and checks its protocol version and capabilities. */
  static async connect(opts: ConnectOptions = {}): Promise<Client> {
    const c = new Client(opts);
    await c.open(false);
    return c;
  }

  // ---- sessions ------------------------------------------------------------------------

  /**
   * Starts `argv` as a new generation of session `name` (creating it if needed). Resolves
   * once the process started, with a handle bound to that generation; rejects with
   * `SpawnFailedError` (its `kind`, `errno` and message) when it could not start.
   */
  async spawn(name: string, argv: string[], opts: SpawnOptions = {}): Promise<SessionHandle> {
    const size =
      opts.cols !== undefined || opts.rows !== undefined
        ? { cols: opts.cols ?? 80, rows: opts.rows ?? 24 }
        : opts.pty === true
          ? { cols: 80, rows: 24 }
          : typeof opts.pty === 'object'
            ? { cols: opts.pty.cols, rows: opts.pty.rows }
            : undefined;
    return this.start(name, 'spawn', spawnArgs(name, argv, opts), size);
  }

  /**
   * Replaces the session's current generation with a new one of the same spec (`ifGen`:
   * only if that is still the current one), and resolves with the new generation's
   * handle once it started.
   */
  async restart(name: string, opts: { ifGen?: number } = {}): Promise<SessionHandle> {
    const spec = (await this.get(name)).spec as { pty?: boolean | { rows: number; cols: number } };
    const size = spec.pty === true ? { cols: 80, rows: 24 } : typeof spec.pty === 'object' && spec.pty ? spec.pty : undefined;
    return this.start(name, 'restart', { session: name, if_gen: opts.ifGen }, size);
  }

  /** `spawn` or `restart`: the request, then a handle on the generation it answers with. */
  private async start(
    name: string,
    op: string,
    args: Record<string, unknown>,
    size: { cols: number; rows: number } | undefined,
  ): Promise<SessionHandle> {
    const sub = this.sub(name);
    sub.pendingSpawns++;
    let handle: SessionHandle | undefined;
    // The subscription goes in the same write, right behind the request: the daemon takes
    // both in one turn, before the process can have written anything, so a lossless
    // client follows the new generation from its first byte.
    const spawned = this.together(() => {
      const answer = this.send(op, args, {
        onResponse: (body) => {
          // Synchronously, before any later message is read: nothing of it is missed.
          handle = this.track(sub, body.gen, size);
        },
      });
      if (!sub.subscribed) this.subscribe(sub, {});
      return answer;
    });
    try {
      await spawned;
    } catch (e) {
      sub.pendingSpawns--;
      this.release(sub);
      throw e;
    }
    sub.pendingSpawns--;
    const h = handle!;
    await h._started;
    h._reveal();
    return h;
  }

  /**
   * A handle on the session's current generation (or generation `gen`), as if it had been
   * spawned here: it delivers the generation's retained output, then follows it.
   */
  async attach(name: string, gen?: number): Promise<SessionHandle> {
    const s = await this.get(name);
    const g = gen ?? s.current;
    const info = s.generations.find((x) => x.gen === g);
    if (g === null || g === undefined || !info) {
      throw new NotRunningError(`session \`${name}\` has no running generation${gen ? ` ${gen}` : ''}`);
    }
    const sub = this.sub(name);
    const existing = sub.handles.get(g);
    if (existing) return existing;
    const h = this.track(sub, g);
    if (info.pid !== null) h._spawned(info.pid);
    await h._started;
    h._reveal();
    return h;
  }

  /** Every session, typed; read in pages when the daemon lists in pages. */
  async list(): Promise<SessionInfo[]> {
    if (!this.hello.capabilities.includes('list_pages')) {
      return (await this.send('list', {}, { retry: true })).sessions;
    }
    const all: SessionInfo[] = [];
    let after: string | null = null;
    do {
      const page: { sessions: SessionInfo[]; next: string | null } = await this.send(
        'list',
        { limit: 1000, after: after ?? undefined },
        { retry: true },
      );
      all.push(...page.sessions);
      after = page.next;
    } while (after !== null);
    return all;
  }

  /** One session in full: its generations, recent ends and spec. */
  async get(name: string): Promise<SessionDetail> {
    return (await this.send('get', { session: name }, { retry: true })).session;
  }

  /** Stops whatever the session runs (any generation); `ifGen` makes it conditional. */
  async stop(name: string, opts: { grace?: Duration; ifGen?: number } = {}): Promise<{ gen: number | null }> {
    return this.send('stop', { session: name, grace: opts.grace, if_gen: opts.ifGen });
  }

  /**
   * Waits until the session's current generation (or generation `gen`) is ready. Resolves
   * with its `ready` event; rejects with a `ReadinessError` carrying the event that says
   * why it never will be (`ready_failed`, or its end).
   */
  async waitReady(name: string, gen?: number): Promise<EventRecord> {
    const r = await this.send('wait', { session: name, gen, for: 'ready' });
    const end = { type: 'event', ...r.end } as EventRecord;
    if (end.event === 'ready') return end;
    const why = end.event === 'ready_failed' ? `readiness failed: ${end.reason}` : `ended before it was ready (${end.event})`;
    throw new ReadinessError(`${name} gen ${end.gen}: ${why}`, end);
  }

  /**
   * Reads the daemon's configuration (`genward daemon --config`) again and brings the
   * sessions it started in line with it; with `dryRun`, changes nothing and says what a
   * reload would do. Rejects with `NoConfigError` on a daemon without a configuration,
   * `BadConfigError` when it cannot be loaded or applied (then nothing changed).
   */
  async reload(opts: { dryRun?: boolean } = {}): Promise<ReloadPlan> {
    const r = await this.send('reload', { dry_run: opts.dryRun || undefined });
    return {
      dry_run: r.dry_run === true,
      start: r.start ?? [],
      stop: r.stop ?? [],
      replace: r.replace ?? [],
      busy: r.busy ?? [],
      unchanged: r.unchanged ?? [],
    };
  }

  /** Stops everything of the session and forgets it. */
  async remove(name: string): Promise<void> {
    await this.send('remove', { session: name });
  }

  /**
   * Replays a session's retained output and events from where `opts` says (`fromStart`,
   * `tail`, `fromPos`, `fromGen`; default: from the start), on a connection of its own.
   * Ends after the retained records unless `follow` is set. A following replay whose
   * connection is lost (the daemon restarted, or was replaced) connects again, as the
   * client does, and resumes after the last byte it handed over.
   */
  async *replay(name: string, opts: ReplayOptions = {}): AsyncGenerator<OutputChunk | EventRecord> {
    const start: Record<string, unknown> = {};
    if (opts.tail !== undefined) start.tail = opts.tail;
    else if (opts.fromPos !== undefined) start.from_pos = opts.fromPos;
    else if (opts.fromGen !== undefined) start.from_gen = opts.fromGen;
    else start.from_start = true;
    if (this.closed) throw new ConnectionLostError('the client was closed');
    const follow = opts.follow === true;
    const resumes = follow && this.opts.reconnect !== false;
    let sock = await openSocket(this.socketPath);
    const items: (OutputChunk | EventRecord)[] = [];
    let bytes = 0;
    let wake: (() => void) | null = null;
    let done = false;
    let failure: unknown = null;
    // The session output position after the last byte handed over: output before it is
    // cut (the daemon replays whole records), and a resumed subscription starts there.
    let nextPos: number | null = opts.fromPos ?? null;
    // The events handed over since that byte (as sent), which a subscription resumed from
    // it is sent again; `again`: those still to be recognised, on a resumed connection.
    let since: string[] = [];
    let again: string[] = [];
    // When the connection was lost, while no resumed subscription has been answered since.
    let lostAt: number | null = null;
    let delay = 25;
    const poke = () => {
      const w = wake;
      wake = null;
      w?.();
    };
    const finish = (err?: unknown) => {
      if (err !== undefined && failure === null && !done) failure = err;
      done = true;
      poke();
    };
    const take = (m: Message) => {
      if (m.kind === 'output') {
        let { data } = m;
        const h = { ...(m.header as any) };
        delete h.event;
        delete h.len;
        if (nextPos !== null && typeof h.pos === 'number' && h.pos < nextPos) {
          const skip = Math.min(nextPos - h.pos, data.length);
          if (skip === data.length) return;
          data = data.subarray(skip);
          h.pos += skip;
          h.offset += skip;
        }
        if (typeof h.pos === 'number') nextPos = h.pos + data.length;
        since = [];
        again = [];
        items.push({ ...h, type: 'output', data });
        bytes += data.length;
        if (bytes > this.highWaterMark) sock.pause();
      } else {
        const body = m.body as any;
        if (body.event === 'dropped') {
          if (nextPos !== null && body.to <= nextPos) return;
          nextPos = Math.max(nextPos ?? 0, body.to);
        } else if (body.event !== 'demoted') {
          // `dropped` and `demoted` are this connection's own, never sent again.
          const key = JSON.stringify(body);
          const seen = again.indexOf(key);
          if (seen >= 0) {
            again = again.slice(seen + 1);
            return;
          }
          since.push(key);
          if (since.length > 1024) since.shift();
        }
        items.push({ type: 'event', ...body });
      }
      poke();
    };
    const subscribe = (s: net.Socket) => {
      const resume = nextPos !== null ? { from_pos: nextPos } : start;
      const sub = { id: 1, op: 'subscribe', session: name, ...resume, lossless: opts.lossless || undefined };
      // Answered after every replayed record: the end of the replay.
      const marker = { id: 2, op: 'hello' };
      s.write(JSON.stringify(sub) + '\n' + (follow ? '' : JSON.stringify(marker) + '\n'));
    };
    const attach = (s: net.Socket) => {
      const decoder = new FrameDecoder();
      s.on('data', (chunk: Buffer) => {
        try {
          decoder.push(chunk, (m) => {
            if (done || sock !== s) return;
            if (m.kind === 'response') {
              if (m.body.ok !== true) finish(errorFromWire(m.body.error));
              else if (m.body.id === 1) {
                lostAt = null;
                delay = 25;
              } else if (m.body.id === 2 && !follow) finish();
              return;
            }
            take(m);
          });
        } catch (e) {
          finish(e);
          s.destroy();
        }
      });
      s.on('error', (e) => {
        if (!resumes) finish(e);
      });
      // Before its end (the retained records, or the loop left when following), a lost
      // connection is an error, never a quiet end: a follower must know it stopped —
      // unless it follows on, on a new connection.
      s.on('close', () => {
        if (done || sock !== s) return;
        if (resumes && !this.closed) void reconnect();
        else finish(new ConnectionLostError());
      });
    };
    const reconnect = async () => {
      lostAt ??= Date.now();
      const deadline = lostAt + (this.opts.reconnectTimeout ?? 60_000);
      again = [...since];
      let last: unknown = null;
      while (!done && !this.closed && Date.now() < deadline) {
        try {
          const s = await openSocket(this.socketPath);
          if (done || this.closed) {
            s.destroy();
            return;
          }
          sock = s;
          attach(s);
          subscribe(s);
          if (bytes > this.highWaterMark) s.pause();
          return;
        } catch (e) {
          last = e;
        }
        await sleep(delay);
        delay = Math.min(delay * 2, 500);
      }
      finish(
        new ConnectionLostError(
          `could not reconnect to the genward daemon at ${this.socketPath}: ${last instanceof Error ? last.message : String(last)}`,
        ),
      );
    };
    const end = (err: unknown) => {
      finish(err);
      sock.destroy();
    };
    this.replays.add(end);
    attach(sock);
    subscribe(sock);
    try {
      for (;;) {
        const item = items.shift();
        if (item !== undefined) {
          if (item.type === 'output') {
            bytes -= item.data.length;
            if (bytes <= this.highWaterMark / 2 && sock.isPaused()) sock.resume();
          }
          yield item;
          continue;
        }
        if (done) break;
        await new Promise<void>((r) => (wake = r));
      }
      if (failure !== null) throw failure;
    } finally {
      done = true;
      this.replays.delete(end);
      sock.destroy();
    }
  }

  /** Sends any request (`{op, ...args}`) and resolves with the daemon's answer. */
  request(op: string, args: Record<string, unknown> = {}): Promise<any> {
    return this.send(op, args);
  }

  /** Closes the connection, and each replay's; handles and replays still waiting fail
   * with ConnectionLostError. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.sock?.destroy();
    const closed = new ConnectionLostError('the client was closed');
    for (const end of this.replays) end(closed);
    this.replays.clear();
    this.failAll(closed);
    this.emit('close');
  }

  // ---- internals -----------------------------------------------------------------------

  private sub(name: string): Sub {
    let s = this.subs.get(name);
    if (!s) {
      s = { name, handles: new Map(), pendingSpawns: 0, subscribed: false, nextPos: null, since: [], again: [] };
      this.subs.set(name, s);
    }
    return s;
  }

  /** Makes the handle of `gen`, subscribes to its session if needed, and waits for its end. */
  private track(sub: Sub, gen: number, size?: { cols: number; rows: number }): SessionHandle {
    const h = new SessionHandle(this, sub.name, gen, size);
    sub.handles.set(gen, h);
    if (!sub.subscribed) this.subscribe(sub, { from_gen: gen });
    // On a subscribed connection this is answered after the generation's exit event and
    // all of its output: the end is never missed, even past a `dropped`.
    this.send('wait', { session: sub.name, gen }, { retry: true }).then(
      (body) => h._end(body.end),
      (e) => {
        if (e instanceof GenwardError && e.code === 'not_running') {
          h._end({ event: 'exited', code: null, signal: null, cause: 'lost' });
        } else if (e instanceof NoSuchSessionError) {
          // Asked again after a reconnection, of a daemon whose session is gone: removed
          // meanwhile by another client, or a daemon back without its state. Its end, if
          // it was delivered, stands (this does nothing then); else the handle fails.
          h._fail(e);
          this._forget(h);
        }
      },
    );
    return h;
  }

  /**
   * Follows `sub`'s session from `start` (on `sock`, the connection just opened, when
   * given). A refusal is handled as it is read (see `unsubscribed`).
   */
  private subscribe(sub: Sub, start: Record<string, unknown>, sock?: net.Socket): void {
    sub.subscribed = true;
    const args = this.subscribeArgs(sub, start);
    const onError = (e: GenwardError) => this.unsubscribed(sub, e);
    const asked = sock ? this.sendNow(sock, 'subscribe', args, { onError }) : this.send('subscribe', args, { onError });
    asked.catch(() => {}); // a lost connection: resubscribed on the next one (see `open`)
  }

  /**
   * A subscription the daemon refused: the next spawn or attach asks again. Refused
   * because the session is gone (after a reconnection: removed meanwhile, or a daemon
   * back without its state), its handles fail with that error rather than wait forever.
   * Called as the refusal is read: the handles failed are those of generations started
   * before the daemon refused it; a spawn it served after the refusal (answered after it)
   * has no handle yet, and is followed by a subscription of its own (`track`).
   */
  private unsubscribed(sub: Sub, e: GenwardError): void {
    sub.subscribed = false;
    if (!(e instanceof NoSuchSessionError) || this.subs.get(sub.name) !== sub) return;
    for (const h of [...sub.handles.values()]) {
      h._fail(e);
      this._forget(h);
    }
  }

  /**
   * Whether the event `ev` (not output, not `dropped`) was delivered already: one of those
   * a subscription resumed after a reconnection sends again. Remembers it otherwise.
   */
  private seenBefore(sub: Sub, ev: Record<string, unknown>): boolean {
    if (ev.event === 'demoted') return false; // this connection's own, never sent again
    const key = JSON.stringify(ev);
    const seen = sub.again.indexOf(key);
    if (seen >= 0) {
      sub.again = sub.again.slice(seen + 1);
      return true;
    }
    sub.since.push(key);
    if (sub.since.length > SINCE_MAX) sub.since.shift();
    return false;
  }

  /**
   * Asks whether a handle's process started, for when its `spawned` event may have been
   * missed (inside a `dropped` range, or across a reconnection).
   */
  private probe(h: SessionHandle): void {
    if (h._isStarted) return;
    this.send('get', { session: h.session }, { retry: true }).then(
      (body) => {
        const g = (body.session as SessionDetail).generations.find((x) => x.gen === h.gen);
        if (g && g.pid !== null) h._spawned(g.pid);
      },
      () => {},
    );
  }

  private subscribeArgs(sub: Sub, start: Record<string, unknown>): Record<string, unknown> {
    return {
      session: sub.name,
      ...start,
      lossless: this.opts.lossless || undefined,
      demote_after: this.opts.lossless ? this.opts.demoteAfter : undefined,
    };
  }

  /** @internal A handle's generation ended: stop following its session if nothing else does. */
  _forget(h: SessionHandle): void {
    const sub = this.subs.get(h.session);
    if (!sub || sub.handles.get(h.gen) !== h) return;
    sub.handles.delete(h.gen);
    this.release(sub);
  }

  private release(sub: Sub): void {
    if (sub.handles.size > 0 || sub.pendingSpawns > 0) return;
    this.subs.delete(sub.name);
    if (sub.subscribed && this.sock) {
      this.send('unsubscribe', { session: sub.name }).catch(() => {});
    }
  }

  /** @internal An output iterator is full: stop reading the socket. */
  _pauseReads(token: object): void {
    this.pausers.add(token);
    this.sock?.pause();
  }

  /** @internal */
  _resumeReads(token: object): void {
    if (this.pausers.delete(token) && this.pausers.size === 0) this.sock?.resume();
  }

  private send(
    op: string,
    args: Record<string, unknown>,
    o: { retry?: boolean; onResponse?: (body: any) => void; onError?: (err: GenwardError) => void } = {},
  ): Promise<any> {
    if (this.closed) return Promise.reject(new ConnectionLostError('the client was closed'));
    const id = this.nextId++;
    const line = JSON.stringify({ id, op, ...args }) + '\n';
    const size = Buffer.byteLength(line) - 1;
    if (size > MAX_LINE) {
      // The daemon would answer it with an id-less `limit` that no call could match.
      return Promise.reject(
        errorFromWire({ code: 'limit', message: `the \`${op}\` request is ${size} bytes, longer than a request line's limit of ${MAX_LINE}` }),
      );
    }
    return new Promise((resolve, reject) => {
      const retry = o.retry ?? RETRYABLE.has(op);
      const session = typeof args.session === 'string' ? args.session : undefined;
      const p: Pending = { id, op, line, retry, sent: false, session, resolve, reject, onResponse: o.onResponse, onError: o.onError };
      this.pending.set(id, p);
      if (this.sock && !this.reconnecting) {
        if (this.gathered) this.gathered.push(p);
        else this.writeOut(this.sock, [p]);
      }
    });
  }

  /** Runs `fn`; the requests it sends go out in one write, which the daemon takes in one turn. */
  private together<T>(fn: () => T): T {
    const gathered: Pending[] = [];
    this.gathered = gathered;
    try {
      return fn();
    } finally {
      this.gathered = null;
      if (this.sock && gathered.length > 0) this.writeOut(this.sock, gathered);
    }
  }

  /**
   * Writes the lines of `ps` on `sock` in one write. The socket may have found the daemon
   * gone before its `close` tells the client (which fails what was sent): when certainly no
   * byte of them went out, they stay unsent, to go on the next connection like requests
   * asked after the loss.
   */
  private writeOut(sock: net.Socket, ps: Pending[]): void {
    const sent = Client.sendBytes(sock, ps.map((p) => p.line).join(''));
    for (const p of ps) p.sent = sent;
  }

  /**
   * Writes `data` on `sock`; false when none of it went out. A socket no longer writable
   * (ended, or destroyed with its `close` still to come) takes nothing. With nothing queued
   * before it, a write is tried at once, and a try that fails (the daemon's end is gone)
   * fails the socket before `write` returns. Queued behind other data, how much of it went
   * out before a failure is not told: true.
   */
  private static sendBytes(sock: net.Socket, data: string): boolean {
    if (!sock.writable) return false;
    const idle = sock.writableLength === 0 && sock.writableCorked === 0;
    sock.write(data);
    return !(idle && sock.errored !== null);
  }

  /**
   * Connects and says hello. `again`: this is the one more try made when the daemon closed
   * the last one before reading its hello (see `refusedUnread`).
   */
  private async open(reconnecting: boolean, again = false): Promise<void> {
    const sock = await openSocket(this.socketPath);
    if (this.closed) {
      sock.destroy();
      return;
    }
    this.sock = sock;
    this.decoder = new FrameDecoder();
    // Until its hello is answered the connection is this attempt's alone: its end fails
    // the attempt, for the one caller (`connect`, or the reconnect loop) to give up or try
    // again. `onClose`, which starts a reconnect loop, is for a connection that was up:
    // were it called here too, a reconnection lost this early would start a second loop.
    let up = false;
    let gone = false;
    let lost!: (e: Error) => void;
    const closed = new Promise<never>((_, reject) => (lost = reject));
    closed.catch(() => {}); // it may end before it is awaited (see below)
    // Whether anything was read, and whether writing the hello failed.
    let read = false;
    let unwritten = false;
    sock.on('data', (chunk: Buffer) => {
      if (this.sock !== sock) return;
      read = true;
      try {
        this.decoder.push(chunk, (m) => {
          // A daemon refusing the connection (`permission_denied` for a uid it does not
          // allow, `limit` at its connection cap) says why in an error of no request's,
          // then closes it: the attempt fails with that error, not as a lost connection.
          if (!up && m.kind === 'response' && m.body.ok !== true && !this.pending.has(m.body.id)) {
            lost(errorFromWire(m.body.error));
            return;
          }
          this.dispatch(m);
        });
      } catch (e) {
        if (up) {
          this.fault(e);
        } else {
          // Not a genward daemon (or not one this client can read): said as such.
          const err = new ProtocolError(`${this.socketPath} does not answer as a genward daemon: ${(e as Error).message}`);
          garbled.add(err);
          lost(err);
        }
        sock.destroy();
      }
    });
    sock.on('error', (e: NodeJS.ErrnoException) => {
      if (!up && e.syscall === 'write') unwritten = true;
    });
    sock.on('close', () => {
      if (up) {
        this.onClose(sock);
      } else {
        gone = true;
        lost(new ConnectionLostError('lost the connection to the genward daemon before it answered hello'));
      }
    });
    // A daemon refusing this client writes why as it accepts the connection, and closes
    // it. Once it closed it, writing fails, and a socket whose write failed is destroyed
    // with what it had not read yet: so what the daemon sent already is read first. The
    // reads start in the turn that connected; the next turn's poll does them.
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    if (this.closed) {
      sock.destroy();
      return;
    }
    // hello first, alone: until it is answered nothing else goes out, so that a connection
    // refused or lost before its hello takes no request with it (one the daemon ran would
    // be reported lost). The subscriptions again, then what waits (see `onClose`), after.
    const helloP = this.sendNow(sock, 'hello', {});
    let hello: HelloInfo;
    let timer: NodeJS.Timeout | undefined;
    try {
      const limit = this.opts.connectTimeout ?? 10_000;
      hello = await Promise.race([
        helloP,
        closed,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new NoDaemonError(this.socketPath, 'ETIMEDOUT', `no answer to hello from ${this.socketPath} within ${limit} ms`)),
            limit,
          );
        }),
      ]);
      checkHello(hello, this.opts.capabilities ?? (this.opts.lossless ? ['lossless'] : []));
      // Gone right behind the answer: no `close` is left to tell `onClose`.
      if (gone) throw new ConnectionLostError();
    } catch (e) {
      this.sock = null;
      sock.destroy();
      // What went out on this socket is answered by no one: ask again on the next one
      // what may be asked again, and fail the rest, as a dropped connection does.
      for (const p of [...this.pending.values()]) {
        if (!p.sent) continue;
        if (p.retry) {
          p.sent = false;
        } else {
          this.pending.delete(p.id);
          p.reject(new ConnectionLostError());
        }
      }
      // Closed by the daemon, unread, between that read and the hello's write: its
      // refusal (if it was one) was lost with the socket. One more try hears it.
      if (!again && unwritten && !read && e instanceof ConnectionLostError) {
        clearTimeout(timer);
        return this.open(reconnecting, true);
      }
      throw e;
    } finally {
      clearTimeout(timer);
    }
    this.hello = hello;
    up = true;
    if (reconnecting) {
      // A subscription whose `subscribe` was never sent (asked with its spawn as the last
      // connection went) goes with what else waits, behind that spawn: sent from here,
      // ahead of it, it would find no session yet, or start in the wrong place.
      const unsent = new Set<string | undefined>();
      for (const p of this.pending.values()) if (!p.sent && p.op === 'subscribe') unsent.add(p.session);
      for (const sub of this.subs.values()) {
        if (!sub.subscribed) continue;
        sub.again = [...sub.since];
        if (unsent.has(sub.name)) continue;
        const gens = [...sub.handles.keys()];
        const start =
          sub.nextPos !== null ? { from_pos: sub.nextPos } : gens.length > 0 ? { from_gen: Math.min(...gens) } : {};
        this.subscribe(sub, start, sock);
      }
    }
    // An iterator full before the loss keeps the output waiting: paused only now, so that
    // the hello answer was read whatever the iterators hold.
    if (this.pausers.size > 0) sock.pause();
  }

  /** Sends on `sock` now, even while reconnecting. */
  private sendNow(
    sock: net.Socket,
    op: string,
    args: Record<string, unknown>,
    o: { onError?: (err: GenwardError) => void } = {},
  ): Promise<any> {
    const id = this.nextId++;
    const line = JSON.stringify({ id, op, ...args }) + '\n';
    return new Promise((resolve, reject) => {
      this.pending.set(id, { id, op, line, retry: false, sent: true, resolve, reject, onError: o.onError });
      sock.write(line);
    });
  }

  private dispatch(m: Message): void {
    if (m.kind === 'response') {
      const id = m.body.id;
      const p = typeof id === 'number' ? this.pending.get(id) : undefined;
      if (!p) {
        if (!m.body.ok) this.fault(errorFromWire(m.body.error));
        return;
      }
      this.pending.delete(id);
      if (m.body.ok === true) {
        p.onResponse?.(m.body);
        p.resolve(m.body);
      } else {
        const err = errorFromWire(m.body.error);
        p.onError?.(err);
        p.reject(err);
      }
      return;
    }
    if (m.kind === 'output') {
      this.onOutput(m.header, m.data);
      return;
    }
    const ev = m.body;
    const sub = typeof ev.session === 'string' ? this.subs.get(ev.session) : undefined;
    if (ev.event === 'dropped') {
      this.onDropped(sub, ev.session, ev.from, ev.to, false);
      return;
    }
    // Delivered after the last byte before the connection was lost: the resumed
    // subscription (from the position after that byte) sends it again.
    if (sub && this.seenBefore(sub, ev)) return;
    if (this.listenerCount('event') > 0) this.emit('event', ev);
    if (!sub) return;
    const h = typeof ev.gen === 'number' ? sub.handles.get(ev.gen) : undefined;
    switch (ev.event) {
      case 'spawned':
        h?._spawned(ev.pid);
        break;
      case 'spawn_failed':
      case 'exited':
        h?._end(ev);
        break;
      case 'input_closed':
      case 'state':
      case 'ready':
      case 'ready_failed':
      case 'unhealthy':
        h?._event(ev.event, ev);
        break;
      case 'demoted':
        for (const x of sub.handles.values()) x._event('demoted', ev);
        break;
    }
  }

  private onOutput(header: Record<string, any>, data: Buffer): void {
    const sub = this.subs.get(header.session);
    if (!sub) return;
    let pos: number = header.pos;
    let offset: number = header.offset;
    if (typeof pos === 'number' && sub.nextPos !== null) {
      if (pos + data.length <= sub.nextPos) return; // seen before a reconnection
      if (pos < sub.nextPos) {
        const skip = sub.nextPos - pos;
        data = data.subarray(skip);
        pos += skip;
        offset += skip;
      } else if (pos > sub.nextPos) {
        // A gap the daemon did not announce: say so.
        this.onDropped(sub, sub.name, sub.nextPos, pos, true);
      }
    }
    if (typeof pos === 'number') sub.nextPos = pos + data.length;
    sub.since = [];
    sub.again = [];
    const h = sub.handles.get(header.gen);
    if (!h) return;
    h._output({
      type: 'output',
      session: sub.name,
      gen: header.gen,
      stream: header.stream,
      offset,
      pos,
      t: header.t,
      data,
    });
  }

  private onDropped(sub: Sub | undefined, session: string, from: number, to: number, reconnect: boolean): void {
    const info: DroppedInfo = { session, from, to };
    if (reconnect) info.reconnect = true;
    if (sub) {
      if (sub.nextPos === null || to > sub.nextPos) sub.nextPos = to;
      for (const h of sub.handles.values()) {
        h._event('dropped', info);
        this.probe(h);
      }
    }
    this.emit('dropped', info);
  }

  private onClose(sock: net.Socket): void {
    if (this.sock !== sock) return;
    this.sock = null;
    if (this.closed) return;
    const err = new ConnectionLostError();
    for (const p of [...this.pending.values()]) {
      if (p.sent && !p.retry) {
        this.pending.delete(p.id);
        p.reject(err);
      } else {
        p.sent = false;
      }
    }
    this.emit('disconnect', err);
    if (this.opts.reconnect === false) {
      this.closed = true;
      this.failAll(err);
      this.emit('close');
      return;
    }
    this.reconnecting = this.reconnectLoop().finally(() => {
      this.reconnecting = null;
      // Whatever was asked while reconnecting.
      for (const p of [...this.pending.values()].sort((a, b) => a.id - b.id)) {
        if (!p.sent && this.sock) this.writeOut(this.sock, [p]);
      }
    });
  }

  private async reconnectLoop(): Promise<void> {
    const deadline = Date.now() + (this.opts.reconnectTimeout ?? 60_000);
    let delay = 25;
    let last: unknown = null;
    while (!this.closed && Date.now() < deadline) {
      try {
        await this.open(true);
        if (this.closed) return;
        for (const sub of this.subs.values()) for (const h of sub.handles.values()) this.probe(h);
        this.emit('reconnect', this.hello);
        return;
      } catch (e) {
        last = e;
        // A daemon this client cannot follow stays one; something that answered garbage,
        // or refused the connection, may be gone (or let it in) on the next try.
        if (e instanceof ProtocolError && !garbled.has(e)) break;
      }
      await sleep(delay);
      delay = Math.min(delay * 2, 500);
    }
    if (this.closed) return;
    this.closed = true;
    const err = new ConnectionLostError(
      `could not reconnect to the genward daemon at ${this.socketPath}: ${last instanceof Error ? last.message : String(last)}`,
    );
    this.failAll(err);
    this.fault(err);
    this.emit('close');
  }

  /** `error` reaches listeners if there are any; it never throws out of the client. */
  private fault(err: unknown): void {
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }

  private failAll(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    for (const sub of this.subs.values()) for (const h of sub.handles.values()) h._fail(err);
    this.subs.clear();
  }
}
