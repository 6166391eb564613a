import { EventEmitter } from 'node:events';
import { GenwardError, SpawnFailedError } from './errors.js';
import type { Client } from './client.js';
import type {
  Disposable,
  DroppedInfo,
  Duration,
  ExitInfo,
  OutputChunk,
  ReadyFailedInfo,
  ReadyInfo,
  Signal,
  UnhealthyInfo,
} from './types.js';

/**
 * A `dropped` event held back for the output iterators that still held output from before
 * the gap when it came: emitted once each of them has handed all of that out (and was
 * asked for more), so that a loop sees it in place, as `onData` listeners do.
 */
class Gate {
  constructor(
    private remaining: number,
    private readonly fire: () => void,
  ) {}

  /** One iterator got past it (or was abandoned). */
  pass(): void {
    if (--this.remaining === 0) this.fire();
  }
}

/** An item of a queue: output (with its size), or a `dropped` waiting for what came before it. */
type Entry<T> = { item: T; size: number } | { gate: Gate };

/** A queue of output read through async iteration; it pauses the client's reads when full. */
class OutputQueue<T> implements AsyncIterableIterator<T> {
  private entries: Entry<T>[] = [];
  private bytes = 0;
  private waiting: ((r: IteratorResult<T>) => void) | null = null;
  private failWaiting: ((e: unknown) => void) | null = null;
  private done = false;
  private error: unknown = null;
  constructor(
    private readonly client: Client,
    private readonly highWaterMark: number,
    private readonly map: (c: OutputChunk) => T,
    private readonly detach: (q: OutputQueue<T>) => void,
  ) {}

  /**
   * Whether its loop may not be done with everything before now: it holds output (or a
   * `dropped`) not handed out, or the last item handed out is still being looked at —
   * until the loop asks for the next one.
   */
  get holding(): boolean {
    return this.waiting === null;
  }

  push(chunk: OutputChunk): void {
    if (this.done) return;
    const item = this.map(chunk);
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = this.failWaiting = null;
      w({ value: item, done: false });
      return;
    }
    this.entries.push({ item, size: chunk.data.length });
    this.bytes += chunk.data.length;
    if (this.bytes > this.highWaterMark) this.client._pauseReads(this);
  }

  /** Holds `gate` until what it holds now has been handed out. */
  hold(gate: Gate): void {
    this.entries.push({ gate });
  }

  end(error?: unknown): void {
    if (this.done) return;
    this.done = true;
    if (error !== undefined) this.error = error;
    if (this.waiting && this.entries.length === 0) {
      const w = this.waiting;
      const f = this.failWaiting;
      this.waiting = this.failWaiting = null;
      if (this.error !== null) f!(this.error);
      else w({ value: undefined, done: true });
    }
  }

  /** Lets go of the gates at its head: what came before them was handed out. */
  private passGates(): void {
    while (this.entries.length > 0) {
      const head = this.entries[0]!;
      if (!('gate' in head)) return;
      this.entries.shift();
      head.gate.pass();
    }
  }

  next(): Promise<IteratorResult<T>> {
    // Asked for more: the loop is done with the item before, and a `dropped` right
    // behind it is due now.
    this.passGates();
    const entry = this.entries.shift() as { item: T; size: number } | undefined;
    if (entry !== undefined) {
      this.bytes -= entry.size;
      if (this.bytes <= this.highWaterMark / 2) this.client._resumeReads(this);
      return Promise.resolve({ value: entry.item, done: false });
    }
    if (this.done) {
      if (this.error !== null) {
        const e = this.error;
        this.error = null;
        return Promise.reject(e);
      }
      return Promise.resolve({ value: undefined, done: true });
    }
    return new Promise((resolve, reject) => {
      this.waiting = resolve;
      this.failWaiting = reject;
    });
  }

  return(): Promise<IteratorResult<T>> {
    this.done = true;
    const entries = this.entries;
    this.entries = [];
    this.bytes = 0;
    for (const e of entries) if ('gate' in e) e.gate.pass();
    this.client._resumeReads(this);
    this.detach(this);
    if (this.waiting) {
      const w = this.waiting;
      this.waiting = this.failWaiting = null;
      w({ value: undefined, done: true });
    }
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }
}

/** Size of one `write` request's payload; a longer write is sent in pieces, one after another. */
const WRITE_PIECE = 256 * 1024;

/** The first and the longest wait, in ms, before a write refused for want of room asks again. */
const ROOM_FIRST_WAIT = 5;
const ROOM_MAX_WAIT = 200;

/**
 * Whether `e` refuses a `write` because the generation's input queue is full: `limit`,
 * "N bytes already queued for generation G, limit M". Room comes as the process reads.
 * With nothing queued (N = 0) the piece alone is past the limit: no room ever comes.
 */
function inputQueueFull(e: unknown): boolean {
  if (!(e instanceof GenwardError) || e.code !== 'limit') return false;
  const queued = /(\d+) bytes already queued/.exec(e.message);
  return queued !== null && Number(queued[1]) > 0;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * One generation of a session, shaped like node-pty's `IPty`: `write`, `resize`, `kill`,
 * `onData`, `onExit`, plus `stop`, `wait`, and async iteration of its output.
 *
 * Every call carries `if_gen`: once the session moved on to another generation, calls
 * fail with `StaleGenerationError` and never reach the successor (once the session was
 * removed, with `NoSuchSessionError`). Events: `data`
 * (Buffer), `exit` (ExitInfo), `dropped` (DroppedInfo), `demoted`, `input_closed`,
 * `state`, `ready` (ReadyInfo), `ready_failed` (ReadyFailedInfo), `unhealthy`
 * (UnhealthyInfo), `error`.
 */
export class SessionHandle extends EventEmitter {
  readonly session: string;
  readonly gen: number;
  /** The process id, once it started (`null` for a process that ended before we learnt it). */
  pid: number | null = null;
  /** The terminal size, for a PTY generation. */
  cols: number | undefined;
  rows: number | undefined;
  /** How it ended, once it has. */
  exitInfo: ExitInfo | null = null;

  private readonly client: Client;
  private startedFlag = false;
  private endedFlag = false;
  private revealed = false;
  private early: (() => void)[] = [];
  private queues = new Set<OutputQueue<any>>();
  private startResolve!: () => void;
  private startReject!: (e: unknown) => void;
  /** @internal Settles once the process started (or could not). */
  readonly _started: Promise<void>;
  private exitResolve!: (e: ExitInfo) => void;
  private exitReject!: (e: unknown) => void;
  private readonly exited: Promise<ExitInfo>;

  /** @internal Handles are made by `Client.spawn` and `Client.attach`. */
  constructor(client: Client, session: string, gen: number, size?: { cols: number; rows: number }) {
    super();
    this.client = client;
    this.session = session;
    this.gen = gen;
    this.cols = size?.cols;
    this.rows = size?.rows;
    this._started = new Promise<void>((res, rej) => {
      this.startResolve = res;
      this.startReject = rej;
    });
    this._started.catch(() => {});
    this.exited = new Promise<ExitInfo>((res, rej) => {
      this.exitResolve = res;
      this.exitReject = rej;
    });
    this.exited.catch(() => {});
  }

  /** Whether the generation has ended (its exit was reported). */
  get hasExited(): boolean {
    return this.exitInfo !== null;
  }

  // ---- node-pty-like calls -------------------------------------------------------------

  /**
   * Writes to the process's input (text as UTF-8, or raw bytes). Resolves once the daemon
   * queued all of it. The daemon queues at most 1 MiB of input per generation: while its
   * queue has no room, the write waits for the process to read, as a write to a pipe does.
   */
  async write(data: string | Uint8Array): Promise<void> {
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    if (bytes.length === 0) {
      await this.call('write', { data: '' });
      return;
    }
    // One piece at a time, each asked again until it was taken: what the process gets is
    // `data` in order. A piece refused otherwise ends the write: the process got a prefix
    // of `data`, never data with a hole in it.
    for (let i = 0; i < bytes.length; i += WRITE_PIECE) {
      const piece = bytes.subarray(i, i + WRITE_PIECE);
      await this.writePiece(piece.toString('base64'));
    }
  }

  /** One `write` request, asked again (5 ms, doubling up to 200 ms) while the queue is full. */
  private async writePiece(b64: string): Promise<void> {
    for (let wait = ROOM_FIRST_WAIT; ; wait = Math.min(wait * 2, ROOM_MAX_WAIT)) {
      try {
        await this.call('write', { data_b64: b64 });
        return;
      } catch (e) {
        if (!inputQueueFull(e)) throw e;
      }
      await sleep(wait);
    }
  }

  /**
   * Sets the terminal's size (PTY generations); the process gets SIGWINCH. With
   * `attached: true` it is the size of a terminal this client shows the session in, for as
   * long as the client is connected: when another client's terminal that resized it later
   * goes, the session gets this size back (tmux's `window-size latest`).
   */
  async resize(cols: number, rows: number, opts: { attached?: boolean } = {}): Promise<void> {
    await this.call('resize', { cols, rows, attached: opts.attached === true ? true : undefined });
    this.cols = cols;
    this.rows = rows;
  }

  /** Sends a signal (default `TERM`) to the process (`scope`: `leader`, `foreground`, `tree`). */
  async kill(signal: Signal = 'TERM', opts: { scope?: 'leader' | 'foreground' | 'tree' } = {}): Promise<void> {
    await this.call('signal', { signal, scope: opts.scope });
  }

  /** Stops the process: its stop signal, then SIGKILL after the grace. Resolves once asked. */
  async stop(opts: { grace?: Duration } = {}): Promise<void> {
    await this.call('stop', { grace: opts.grace });
  }

  /**
   * Replaces this generation with a new one of the same spec, and resolves with the new
   * generation's handle once it started; refused (`StaleGenerationError`) if this one was
   * already replaced.
   */
  restart(): Promise<SessionHandle> {
    return this.client.restart(this.session, { ifGen: this.gen });
  }

  /** Closes the process's input (in a PTY: sends end-of-file). */
  async closeInput(): Promise<void> {
    await this.call('close_input', {});
  }

  /** Resolves with how this generation ended, after all of its output was delivered. */
  wait(): Promise<ExitInfo> {
    return this.exited;
  }

  /** node-pty style: calls `listener` with each chunk of output, as a Buffer. */
  onData(listener: (data: Buffer) => void): Disposable {
    this.on('data', listener);
    return { dispose: () => this.off('data', listener) };
  }

  /** node-pty style: calls `listener` once with `{code, signal, cause}` when the generation ends. */
  onExit(listener: (e: ExitInfo) => void): Disposable {
    if (this.exitInfo && this.revealed) {
      const info = this.exitInfo;
      let live = true;
      setImmediate(() => live && listener(info));
      return { dispose: () => (live = false) };
    }
    this.once('exit', listener);
    return { dispose: () => this.off('exit', listener) };
  }

  /** Calls `listener` when the generation's `ready` check passed (spawned with `ready`). */
  onReady(listener: (e: ReadyInfo) => void): Disposable {
    return this.listen('ready', listener);
  }

  /** Calls `listener` when the generation's `ready` check failed (the process runs on). */
  onReadyFailed(listener: (e: ReadyFailedInfo) => void): Disposable {
    return this.listen('ready_failed', listener);
  }

  /**
   * Calls `listener` when the generation failed its `live` probe `failures` times in a row:
   * the daemon is stopping it (its exit follows, cause `stopped`) and its restart policy
   * counts it as a failure.
   */
  onUnhealthy(listener: (e: UnhealthyInfo) => void): Disposable {
    return this.listen('unhealthy', listener);
  }

  private listen<T>(name: string, listener: (e: T) => void): Disposable {
    const f = (body: Record<string, unknown>) => listener(body as T);
    this.on(name, f);
    return { dispose: () => this.off(name, f) };
  }

  /**
   * Output as an async iterator of Buffers, from now until the generation ends. While more
   * than `highWaterMark` bytes wait unread, the client stops reading its socket: with a
   * lossless client the daemon then holds the process's output back (the process blocks in
   * its writes); otherwise the daemon drops what this client cannot take and a `dropped`
   * event says so.
   */
  output(opts: { highWaterMark?: number } = {}): AsyncIterableIterator<Buffer> {
    return this.queue((c) => c.data, opts.highWaterMark);
  }

  /** Like `output()`, but each item says which stream and positions it has. */
  outputChunks(opts: { highWaterMark?: number } = {}): AsyncIterableIterator<OutputChunk> {
    return this.queue((c) => c, opts.highWaterMark);
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<Buffer> {
    return this.output();
  }

  private queue<T>(map: (c: OutputChunk) => T, hwm?: number): AsyncIterableIterator<T> {
    const q = new OutputQueue<T>(this.client, hwm ?? this.client.highWaterMark, map, (x) => this.queues.delete(x));
    if (this.endedFlag && this.early.length === 0) q.end();
    else this.queues.add(q);
    return q;
  }

  private async call(op: string, args: Record<string, unknown>): Promise<any> {
    return this.client.request(op, { session: this.session, if_gen: this.gen, ...args });
  }

  // ---- fed by the client ---------------------------------------------------------------

  /** @internal */
  get _isStarted(): boolean {
    return this.startedFlag || this.endedFlag;
  }

  /** @internal */
  _spawned(pid: number): void {
    if (this.startedFlag) return;
    this.startedFlag = true;
    this.pid = pid;
    this.startResolve();
  }

  /** @internal Lets events through, once whoever made the handle has it. */
  _reveal(): void {
    setImmediate(() => {
      this.revealed = true;
      const early = this.early;
      this.early = [];
      for (const f of early) f();
    });
  }

  private later(f: () => void): void {
    if (this.revealed) f();
    else this.early.push(f);
  }

  /** @internal */
  _output(chunk: OutputChunk): void {
    if (this.endedFlag) return;
    this.later(() => {
      this.emit('data', chunk.data);
      for (const q of this.queues) q.push(chunk);
    });
  }

  /** @internal */
  _event(
    name: 'dropped' | 'demoted' | 'input_closed' | 'state' | 'ready' | 'ready_failed' | 'unhealthy',
    body: DroppedInfo | Record<string, unknown>): void {
    this.later(() => {
      const holding = name === 'dropped' ? [...this.queues].filter((q) => q.holding) : [];
      if (holding.length === 0) {
        this.emit(name, body);
        return;
      }
      // Output from before the gap still waits in an iterator: said after it.
      const gate = new Gate(holding.length, () => this.emit(name, body));
      for (const q of holding) q.hold(gate);
    });
  }

  /** @internal The terminal event (`exited` or `spawn_failed`), from the event or a `wait`. */
  _end(body: Record<string, any>): void {
    if (this.endedFlag) return;
    this.endedFlag = true;
    if (body.event === 'spawn_failed') {
      const err = new SpawnFailedError(this.session, this.gen, body.error ?? { kind: 'other', message: 'spawn failed' });
      this.startReject(err);
      this.exitReject(err);
      this.client._forget(this);
      return;
    }
    const info: ExitInfo = {
      session: this.session,
      gen: this.gen,
      code: body.code ?? null,
      signal: body.signal ?? null,
      cause: body.cause ?? 'exited',
      discarded: body.discarded,
      truncated: body.truncated,
    };
    if (!this.startedFlag) {
      this.startedFlag = true;
      this.startResolve();
    }
    this.exitInfo = info;
    this.client._forget(this);
    this.later(() => {
      this.exitResolve(info);
      this.emit('exit', info);
      for (const q of this.queues) q.end();
      this.queues.clear();
    });
  }

  /** @internal The client gave up on the daemon. */
  _fail(err: unknown): void {
    if (this.endedFlag) return;
    this.endedFlag = true;
    this.startReject(err);
    this.later(() => {
      this.exitReject(err);
      for (const q of this.queues) q.end(err);
      this.queues.clear();
      if (this.listenerCount('error') > 0) this.emit('error', err);
    });
  }
}
