// Test helpers: find the genward binary and run a private daemon per test file.
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, chmodSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const here = dirname(fileURLToPath(import.meta.url));
export const repoRoot = join(here, '..', '..', '..');

/** `GENWARD_BIN`, else the newest of the repository's release and debug builds. */
export function genwardBin() {
  if (process.env.GENWARD_BIN) return process.env.GENWARD_BIN;
  const target = process.env.CARGO_TARGET_DIR || join(repoRoot, 'target');
  const found = ['release', 'debug']
    .map((p) => join(target, p, 'genward'))
    .filter((p) => existsSync(p))
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  if (found.length === 0) {
    throw new Error('no genward binary: run `cargo build` (or `make release`) first, or set GENWARD_BIN');
  }
  return found[0];
}

/** A daemon of its own, on a private state directory in a temporary directory. */
export class Daemon {
  constructor() {
    this.dir = mkdtempSync(join(tmpdir(), 'genward-node-'));
    chmodSync(this.dir, 0o700);
    this.stateDir = join(this.dir, 'state');
    this.socket = join(this.stateDir, 'genward.sock');
    this.logPath = join(this.dir, 'daemon.log');
    this.proc = null;
  }

  /** `opts`: as `start`'s. */
  static async start(opts = {}) {
    const d = new Daemon();
    try {
      await d.start(opts);
    } catch (e) {
      await d.stop();
      throw e;
    }
    return d;
  }

  /**
   * Starts (or starts again) the daemon on this state directory; resolves once it serves.
   * `socket`: listen there instead of the state directory's socket (which clients find);
   * `args`: more `genward daemon` arguments (e.g. `['--config', dir]`).
   */
  async start({ socket, args = [] } = {}) {
    const log = openSync(this.logPath, 'a');
    const where = socket ? ['--socket', socket] : [];
    const proc = spawn(genwardBin(), [...where, 'daemon', '--state-dir', this.stateDir, '--ready-fd', '3', ...args], {
      stdio: ['ignore', log, log, 'pipe'],
    });
    closeSync(log);
    this.proc = proc;
    const exited = new Promise((r) => {
      proc.once('exit', (code, sig) => r({ code, sig }));
      proc.once('error', (e) => r({ code: null, sig: e.message }));
    });
    this.exited = exited;
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`daemon not ready after 15s:\n${this.log()}`)), 15_000);
      proc.stdio[3].once('data', () => {
        clearTimeout(timer);
        resolve();
      });
      exited.then(({ code, sig }) => {
        clearTimeout(timer);
        reject(new Error(`daemon exited (${code ?? sig}) before it was ready:\n${this.log()}`));
      });
    });
    proc.stdio[3].destroy();
  }

  log() {
    try {
      return readFileSync(this.logPath, 'utf8');
    } catch {
      return '';
    }
  }

  /** SIGKILL: the sessions and the keeper stay, for the next daemon. */
  async crash() {
    this.proc.kill('SIGKILL');
    await this.exited;
  }

  /** SIGTERM (stops every session, then the keeper), SIGKILL if it lingers; removes the directory. */
  async stop() {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null && this.proc.pid !== undefined) {
      this.proc.kill('SIGTERM');
      const t = setTimeout(() => this.proc.kill('SIGKILL'), 15_000);
      await this.exited;
      clearTimeout(t);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Resolves when `pred()` is true, polling; rejects after `ms`. */
export async function until(pred, ms = 10_000, what = 'condition') {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Collects a handle's output into one Buffer as it arrives. */
export function collect(handle) {
  const parts = [];
  handle.onData((d) => parts.push(d));
  return { get: () => Buffer.concat(parts), text: () => Buffer.concat(parts).toString('latin1') };
}

export const fakeHello = { protocol: 1, version: 'fake', capabilities: ['output_frames', 'replay', 'if_gen', 'wait'] };

/** A stand-in daemon on a socket of its own. `serve(n, req, reply, conn)` handles request
 * `req` on connection number `n` (`reply(body)` answers it with success); returning
 * `false` stops reading that connection. `asked[n]` lists the ops each connection got. */
export async function standIn(serve) {
  const dir = mkdtempSync(join(tmpdir(), 'genward-node-fake-'));
  const socket = join(dir, 'fake.sock');
  const conns = [];
  const asked = [];
  const server = createServer((conn) => {
    const n = conns.push(conn) - 1;
    asked.push([]);
    let buf = '';
    conn.on('error', () => {});
    conn.on('data', (chunk) => {
      buf += chunk;
      for (let i; (i = buf.indexOf('\n')) >= 0; buf = buf.slice(i + 1)) {
        const req = JSON.parse(buf.slice(0, i));
        asked[n].push(req.op);
        const reply = (body) => conn.write(JSON.stringify({ id: req.id, ok: true, ...body }) + '\n');
        if (serve(n, req, reply, conn) === false) return;
      }
    });
  });
  await new Promise((r) => server.listen(socket, r));
  return {
    socket,
    conns,
    asked,
    async close() {
      for (const c of conns) c.destroy();
      await new Promise((r) => server.close(r));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
