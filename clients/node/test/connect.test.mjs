// Connecting where no daemon serves: a clear, typed error at once, never a hang.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Client,
  ConnectionLostError,
  GenwardError,
  LimitError,
  NoDaemonError,
  PermissionDeniedError,
  ProtocolError,
} from '../dist/esm/index.js';
import { Daemon } from './daemon.mjs';

test('no daemon at the socket: NoDaemonError naming the socket', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'genward-node-connect-'));
  try {
    const socket = join(dir, 'genward.sock');
    await assert.rejects(Client.connect({ socket }), (e) => {
      assert.ok(e instanceof NoDaemonError, String(e));
      assert.equal(e.code, 'ENOENT');
      assert.equal(e.socket, socket);
      assert.match(e.message, /no genward daemon at .*genward daemon/);
      return true;
    });
    // A directory (or a socket nobody listens on) is refused the same way.
    await assert.rejects(Client.connect({ socket: dir }), NoDaemonError);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('something that never answers hello: NoDaemonError after connectTimeout', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'genward-node-connect-'));
  const socket = join(dir, 'mute.sock');
  const conns = [];
  const server = createServer((c) => conns.push(c));
  await new Promise((r) => server.listen(socket, r));
  try {
    const t0 = Date.now();
    await assert.rejects(Client.connect({ socket, connectTimeout: 300 }), (e) => {
      assert.ok(e instanceof NoDaemonError, String(e));
      assert.equal(e.code, 'ETIMEDOUT');
      return true;
    });
    assert.ok(Date.now() - t0 < 5000);
  } finally {
    for (const c of conns) c.destroy();
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a first connection that goes before hello is answered: connect fails, and nothing reconnects', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'genward-node-connect-'));
  const socket = join(dir, 'gone.sock');
  const conns = [];
  // Goes as the hello arrives; a connection after it would be a reconnect loop's.
  const server = createServer((c) => {
    conns.push(c);
    c.on('error', () => {});
    c.once('data', () => c.destroy());
  });
  await new Promise((r) => server.listen(socket, r));
  try {
    await assert.rejects(Client.connect({ socket }), ConnectionLostError);
    await new Promise((r) => setTimeout(r, 400));
    assert.equal(conns.length, 1);
  } finally {
    for (const c of conns) c.destroy();
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Runs `fn(socket)` with `serve(conn)` serving each connection made to `socket`. */
async function serving(serve, fn) {
  const dir = mkdtempSync(join(tmpdir(), 'genward-node-connect-'));
  const socket = join(dir, 'serve.sock');
  const conns = [];
  const server = createServer((c) => {
    conns.push(c);
    c.on('error', () => {});
    serve(c);
  });
  await new Promise((r) => server.listen(socket, r));
  try {
    return await fn(socket);
  } finally {
    for (const c of conns) c.destroy();
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  }
}

test('a daemon that refuses the connection: its typed error, with its message', async () => {
  const refusals = [
    [PermissionDeniedError, 'permission_denied', 'uid 65534 may not use this daemon (owner uid 0; start it with --allow-uid 65534 to permit)'],
    [LimitError, 'limit', 'too many connections (limit 4096)'],
  ];
  for (const [type, code, message] of refusals) {
    // As the daemon refuses: its reason as it accepts the connection, before reading
    // anything, then the connection closed.
    const line = JSON.stringify({ id: null, ok: false, error: { code, message } }) + '\n';
    await serving(
      (c) => c.write(line, () => c.destroy()),
      async (socket) => {
        await assert.rejects(Client.connect({ socket }), (e) => {
          assert.ok(e instanceof type, String(e));
          assert.ok(e instanceof GenwardError);
          assert.equal(e.code, code);
          assert.equal(e.message, message);
          return true;
        });
      },
    );
  }
});

test('something at the socket that answers what is not genward\'s protocol: ProtocolError', async () => {
  for (const answer of ['HTTP/1.1 400 Bad Request\r\n\r\n', '\u0000\u00ff garbage\n']) {
    await serving(
      (c) => c.once('data', () => c.write(answer, () => c.destroy())),
      async (socket) => {
        await assert.rejects(Client.connect({ socket }), (e) => {
          assert.ok(e instanceof ProtocolError, String(e));
          assert.ok(e.message.includes(socket), e.message);
          return true;
        });
      },
    );
  }
});

test('reconnecting to something that never answers hello: what was asked meanwhile is asked again of the daemon that comes back', async () => {
  const daemon = await Daemon.start();
  const mute = createServer((c) => conns.push(c));
  const conns = [];
  try {
    const client = await Client.connect({ socket: daemon.socket, connectTimeout: 200 });
    const disconnected = once(client, 'disconnect');
    await daemon.crash();
    await disconnected;
    rmSync(daemon.socket, { force: true });
    await new Promise((r) => mute.listen(daemon.socket, r));
    const listed = client.list();
    // Long enough for hellos to go unanswered there, with the list behind them.
    await new Promise((r) => setTimeout(r, 700));
    assert.ok(conns.length > 0, 'the client tried the mute socket');
    // It stops listening; the connections it took stay open (and mute) till the end.
    mute.close();
    rmSync(daemon.socket, { force: true });
    await daemon.start();
    const sessions = await Promise.race([
      listed,
      new Promise((_, reject) => setTimeout(() => reject(new Error('list never answered')), 10_000)),
    ]);
    assert.ok(Array.isArray(sessions));
    client.close();
  } finally {
    for (const c of conns) c.destroy();
    if (mute.listening) mute.close();
    await daemon.stop();
  }
});

test('a request past the 1 MiB line limit is refused at once with `limit`, and the client goes on', { timeout: 20_000 }, async () => {
  const daemon = await Daemon.start();
  try {
    const client = await Client.connect({ socket: daemon.socket });
    const start = Date.now();
    await assert.rejects(client.spawn('big', ['true'], { env: { BIG: 'x'.repeat(1 << 20) } }), (e) => {
      assert.equal(e.code, 'limit');
      return true;
    });
    assert.ok(Date.now() - start < 5000);
    const h = await client.spawn('small', ['true']);
    assert.equal((await h.wait()).cause, 'exited');
    client.close();
  } finally {
    await daemon.stop();
  }
});
