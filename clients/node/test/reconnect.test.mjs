// The client across a daemon crash and restart on the same state directory, and across an
// upgrade in place: subscriptions resume from the last position seen, handles keep working.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, renameSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, ConnectionLostError, NoSuchSessionError } from '../dist/esm/index.js';
import { Daemon, collect, fakeHello, standIn, until } from './daemon.mjs';

let daemon;

before(async () => {
  daemon = await Daemon.start();
});

after(async () => {
  await daemon?.stop();
});

const ticks = (n) => Array.from({ length: n }, (_, i) => `tick ${i}\n`).join('');

test('a daemon killed and started again: the client reconnects and resumes every subscription', async () => {
  const client = await Client.connect({ socket: daemon.socket });
  try {
    const script = 'i=0; while [ $i -lt 40 ]; do echo tick $i; i=$((i+1)); sleep 0.02; done; cat';
    const h = await client.spawn('ticker', ['sh', '-c', script]);
    const out = collect(h);
    const quiet = await client.spawn('quiet', ['cat']);
    const quietOut = collect(quiet);
    const dropped = [];
    h.on('dropped', (d) => dropped.push(d));
    await until(() => out.text().includes('tick 3\n'), 10_000, 'the first ticks');

    const disconnected = once(client, 'disconnect');
    await daemon.crash();
    await disconnected;
    // Asked while no daemon runs: sent once the client is back.
    const queued = quiet.write('while away\n');
    await new Promise((r) => setTimeout(r, 300));
    const reconnected = once(client, 'reconnect');
    await daemon.start();
    const [hello] = await reconnected;
    assert.equal(hello.protocol, 1);
    await queued;

    await until(() => out.text().includes('tick 39\n'), 10_000, 'the last tick');
    // Every tick once, in order: what was written while the daemon was away included.
    assert.equal(out.text(), ticks(40));
    assert.deepEqual(dropped, []);
    await h.write('after\n');
    await until(() => out.text() === ticks(40) + 'after\n', 10_000, 'the echo after the restart');
    await until(() => quietOut.text() === 'while away\n', 10_000, 'the queued write');

    await h.closeInput();
    const end = await h.wait();
    assert.equal(end.gen, h.gen);
    assert.equal(end.code, 0);
    await quiet.stop();
    assert.equal((await quiet.wait()).cause, 'stopped');
  } finally {
    client.close();
  }
});

test('a following replay resumes across a daemon crash after the last byte and event it handed over', async () => {
  const client = await Client.connect({ socket: daemon.socket });
  try {
    const first = await client.spawn('replayed', ['sh', '-c', 'echo before']);
    await first.wait();
    let text = '';
    const events = [];
    let caughtUp;
    const upToDate = new Promise((r) => (caughtUp = r));
    const seen = (async () => {
      for await (const r of client.replay('replayed', { fromStart: true, follow: true })) {
        if (r.type === 'output') text += r.data.toString('latin1');
        else events.push(r);
        if (r.type === 'event' && r.event === 'exited' && r.gen === first.gen) caughtUp();
        if (text === 'before\nafter\n') break;
      }
    })();
    await Promise.race([upToDate, seen]);
    // The last record it handed over is an event (the first generation's end): resumed
    // from the byte after `before`, the daemon sends it again; it is not handed over twice.
    const disconnected = once(client, 'disconnect');
    await daemon.crash();
    await disconnected;
    const reconnected = once(client, 'reconnect');
    await daemon.start();
    await reconnected;
    const second = await client.spawn('replayed', ['sh', '-c', 'echo after']);
    await seen;
    assert.equal(text, 'before\nafter\n');
    const count = (event, gen) => events.filter((e) => e.event === event && e.gen === gen).length;
    assert.deepEqual(
      [count('spawned', first.gen), count('exited', first.gen), count('spawned', second.gen)],
      [1, 1, 1],
    );
    await second.wait();
  } finally {
    client.close();
  }
});

test('a pending waitReady is asked again across a daemon crash', async () => {
  const client = await Client.connect({ socket: daemon.socket });
  try {
    // Ready once it prints `listening`, which it does only when told to, after the crash.
    const h = await client.spawn('readied', ['sh', '-c', 'read go; echo listening; cat'], {
      ready: { output: 'listening', timeout: '60s' },
    });
    const ready = client.waitReady('readied', h.gen);
    ready.catch(() => {}); // awaited below
    // Sent, its answer still to come, when the connection is lost.
    await client.request('hello');
    const disconnected = once(client, 'disconnect');
    await daemon.crash();
    await disconnected;
    const reconnected = once(client, 'reconnect');
    await daemon.start();
    await reconnected;
    await h.write('go\n');
    const event = await ready;
    assert.equal(event.event, 'ready');
    assert.equal(event.gen, h.gen);
    await h.closeInput();
    await h.wait();
  } finally {
    client.close();
  }
});

test('a handle\'s wait carries on across a daemon crash', async () => {
  const client = await Client.connect({ socket: daemon.socket });
  try {
    const h = await client.spawn('inflight', ['cat']);
    const exit = h.wait();
    const disconnected = once(client, 'disconnect');
    await daemon.crash();
    await disconnected;
    const reconnected = once(client, 'reconnect');
    await daemon.start();
    await reconnected;
    await h.closeInput();
    assert.equal((await exit).code, 0);
  } finally {
    client.close();
  }
});

test('output the daemon read and let go while the client was away is reported as dropped', async () => {
  const client = await Client.connect({ socket: daemon.socket });
  try {
    // Writes 2 MiB a second after starting: while no daemon runs, the keeper holds the pipe.
    const script = 'echo start; sleep 1; head -c 2097152 /dev/zero; echo; echo end; cat';
    const h = await client.spawn('gap', ['sh', '-c', script], { buffer: 65536 });
    const dropped = [];
    h.on('dropped', (d) => dropped.push(d));
    const chunks = [];
    h.on('data', (d) => chunks.push(d));
    await until(() => Buffer.concat(chunks).includes('start\n'), 10_000, 'start');
    const disconnected = once(client, 'disconnect');
    await daemon.crash();
    await disconnected;
    // The next daemon listens where the client does not look yet, reads all of it into
    // its 64 KiB log, and only then becomes reachable: the client comes back too late.
    const hidden = join(daemon.dir, 'hidden.sock');
    await daemon.start({ socket: hidden });
    const probe = await Client.connect({ socket: hidden, reconnect: false });
    await until(async () => (await probe.get('gap')).generations[0].offsets.stdout === 6 + 2097152 + 5, 10_000, 'the read');
    probe.close();
    const reconnected = once(client, 'reconnect');
    renameSync(hidden, daemon.socket);
    await reconnected;
    await until(() => Buffer.concat(chunks).includes('end\n'), 10_000, 'end');
    const total = 6 + 2097152 + 1 + 4;
    const got = Buffer.concat(chunks).length;
    const missed = dropped.reduce((n, d) => n + (d.to - d.from), 0);
    assert.ok(dropped.length > 0, 'the gap was reported');
    assert.equal(got + missed, total);
    assert.ok(Buffer.concat(chunks).toString().startsWith('start\n'));
    await h.closeInput();
    assert.equal((await h.wait()).code, 0);
  } finally {
    client.close();
  }
});

/** Resolves with what `p` settles with (its error, if it rejects), or `'still pending'` after 10 s. */
const settled = (p) =>
  Promise.race([p.catch((e) => e), new Promise((r) => setTimeout(() => r('still pending'), 10_000))]);

test('a handle whose session was removed while the client was away fails with NoSuchSessionError', async () => {
  const client = await Client.connect({ socket: daemon.socket });
  try {
    const h = await client.spawn('removed-away', ['sleep', '1000']);
    let exits = 0;
    h.onExit(() => exits++);
    const waited = h.wait();
    const iterated = (async () => {
      for await (const _ of h);
      return 'ended';
    })();
    const disconnected = once(client, 'disconnect');
    await daemon.crash();
    await disconnected;
    // The daemon comes back where the client does not look yet, and another client
    // removes the session there: no event of it reaches this client.
    const hidden = join(daemon.dir, 'hidden.sock');
    await daemon.start({ socket: hidden });
    const other = await Client.connect({ socket: hidden, reconnect: false });
    await other.remove('removed-away');
    await until(
      () => other.get('removed-away').then(() => false, (e) => e instanceof NoSuchSessionError),
      10_000,
      'the session gone',
    );
    other.close();
    const reconnected = once(client, 'reconnect');
    renameSync(hidden, daemon.socket);
    await reconnected;
    const end = await settled(waited);
    assert.ok(end instanceof NoSuchSessionError, `wait: ${String(end)}`);
    const loop = await settled(iterated);
    assert.ok(loop instanceof NoSuchSessionError, `iterator: ${String(loop)}`);
    assert.equal(exits, 0);
    await assert.rejects(h.write('x'), NoSuchSessionError);
  } finally {
    client.close();
  }
});

test('events a handle emitted are not emitted again after a reconnection', async () => {
  const client = await Client.connect({ socket: daemon.socket });
  try {
    const h = await client.spawn('once-only', ['sh', '-c', 'echo listening; exec 0<&-; sleep 1000'], {
      ready: { output: 'listening' },
    });
    const counts = { ready: 0, input_closed: 0 };
    h.on('ready', () => counts.ready++);
    h.on('input_closed', () => counts.input_closed++);
    await Promise.all([once(h, 'ready'), once(h, 'input_closed')]);
    const disconnected = once(client, 'disconnect');
    await daemon.crash();
    await disconnected;
    const reconnected = once(client, 'reconnect');
    await daemon.start();
    await reconnected;
    await h.stop();
    // Answered after every event of the generation: all of them reached the handle.
    assert.equal((await h.wait()).cause, 'stopped');
    // Each event the daemon recorded is emitted once: those the subscription, resumed after
    // the last byte as the client came back, sends again are not. The daemon may record an
    // event anew, though: an `input_closed` it sees again on the stdin its keeper still held
    // when the crash came before the keeper was told to let it go. That one is emitted.
    const recorded = { ready: 0, input_closed: 0 };
    for await (const r of client.replay('once-only', { fromStart: true })) {
      if (r.type === 'event' && r.gen === h.gen && r.event in recorded) recorded[r.event]++;
    }
    assert.equal(recorded.ready, 1);
    assert.deepEqual(counts, recorded);
  } finally {
    client.close();
  }
});

test('a client that may not reconnect fails its handles', async () => {
  const client = await Client.connect({ socket: daemon.socket, reconnect: false });
  const h = await client.spawn('noretry', ['cat']);
  const closed = once(client, 'close');
  await daemon.crash();
  await closed;
  await assert.rejects(h.wait(), ConnectionLostError);
  await assert.rejects(client.list(), ConnectionLostError);
  await daemon.start();
  const again = await Client.connect({ socket: daemon.socket });
  const [s] = (await again.list()).filter((x) => x.name === 'noretry');
  assert.equal(s.state, 'running');
  await again.stop('noretry');
  again.close();
});

test('an upgrade in place keeps the connection and the handles', async () => {
  const client = await Client.connect({ socket: daemon.socket });
  try {
    const h = await client.spawn('upgraded', ['cat']);
    const out = collect(h);
    let disconnected = false;
    client.on('disconnect', () => (disconnected = true));
    const res = await client.request('upgrade');
    assert.equal(typeof res.version, 'string');
    await h.write('still here\n');
    await until(() => out.text() === 'still here\n', 10_000, 'the echo after the upgrade');
    assert.equal(disconnected, false);
    await h.closeInput();
    assert.equal((await h.wait()).code, 0);
  } finally {
    client.close();
  }
});

/**
 * Moments between the daemon's end and the `close` of the client's socket (which tells the
 * client), each with how the socket is then.
 */
const goneMoments = {
  // It read the daemon's end and is still writable: a write fails at once.
  end: { at: (sock, fn) => sock.once('end', fn), state: { writable: true, destroyed: false } },
  // It ended its own side too: it takes nothing more.
  finish: { at: (sock, fn) => sock.once('finish', fn), state: { writable: false, destroyed: false } },
  // Destroyed right after `finish`, without an error; `close` comes later.
  destroyed: {
    at: (sock, fn) => sock.once('finish', () => process.nextTick(fn)),
    state: { writable: false, destroyed: true },
  },
};

/**
 * Crashes the daemon and runs `ask` at `moment` (of `goneMoments`), before the client can
 * know; starts the daemon again. Checks how the socket was then, and resolves with what
 * `ask` came to: 'ok', or its error.
 */
async function askWhileGone(client, moment, ask) {
  let state;
  let asked;
  // The client's socket is private: reached into here to act in that moment.
  const sock = client.sock;
  goneMoments[moment].at(sock, () => {
    state = { writable: sock.writable, destroyed: sock.destroyed };
    asked = ask().then(
      () => 'ok',
      (e) => e,
    );
  });
  // Answered in order: everything sent before was read, so the crash leaves an end to
  // read, not a reset.
  await client.list();
  // Nothing to reconnect to until the next daemon binds: the dying daemon's listener can
  // outlive its connections for a moment, and a connection made to it then is reset with
  // what was written into it (which, for all the client can tell, may have been read).
  rmSync(daemon.socket);
  const disconnected = once(client, 'disconnect');
  await daemon.crash();
  await disconnected;
  const reconnected = once(client, 'reconnect');
  await daemon.start();
  await reconnected;
  assert.deepEqual(state, goneMoments[moment].state, moment);
  return asked;
}

for (const moment of Object.keys(goneMoments)) {
  test(`a request written into a connection the daemon already left goes on the next one (at ${moment})`, async () => {
    const client = await Client.connect({ socket: daemon.socket });
    try {
      const h = await client.spawn(`left-${moment}`, ['cat']);
      const out = collect(h);
      // A `write`, which may not be asked twice: never reached the daemon, it is not lost.
      assert.equal(await askWhileGone(client, moment, () => h.write('once\n')), 'ok');
      await h.closeInput();
      assert.equal((await h.wait()).code, 0);
      assert.equal(out.text(), 'once\n');
    } finally {
      client.close();
    }
  });
}

test('a spawn asked into a connection the daemon already left goes on the next one', async () => {
  const client = await Client.connect({ socket: daemon.socket });
  try {
    let h;
    const spawn = () => client.spawn('left-spawn', ['cat']).then((x) => (h = x));
    // The spawn and its subscription, one write: it fails at once, and both wait.
    assert.equal(await askWhileGone(client, 'end', spawn), 'ok');
    const out = collect(h);
    await h.write('spawned once\n');
    await h.closeInput();
    assert.equal((await h.wait()).code, 0);
    assert.equal(out.text(), 'spawned once\n');
  } finally {
    client.close();
  }
});

test('a request asked while reconnecting, written into a connection gone right after hello, goes on the next one', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'genward-node-gone-'));
  const socket = join(dir, 'fake.sock');
  const hello = { protocol: 1, version: 'fake', capabilities: ['output_frames', 'replay', 'if_gen', 'wait'] };
  const conns = [];
  const asked = [];
  let client;
  let stopped;
  // A stand-in daemon answering every request `ok`. On the second connection (the client
  // reconnecting) the stop is asked as the hello arrives, too late for the connection's
  // first writes: it waits for the hello's answer. The connection goes right after that
  // answer, before the client writes the stop.
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
        const gone = n === 1 && req.op === 'hello';
        if (gone) {
          stopped = client.stop('s').then(
            () => 'ok',
            (e) => e,
          );
        }
        conn.write(JSON.stringify({ id: req.id, ok: true, ...(req.op === 'hello' ? hello : {}) }) + '\n');
        if (gone) {
          conn.destroy();
          return;
        }
      }
    });
  });
  await new Promise((r) => server.listen(socket, r));
  try {
    client = await Client.connect({ socket });
    const reconnected = once(client, 'reconnect');
    conns[0].destroy();
    await reconnected;
    assert.equal(await stopped, 'ok');
    assert.deepEqual(asked.slice(1), [['hello'], ['hello', 'stop']]);
  } finally {
    client?.close();
    for (const c of conns) c.destroy();
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a reconnection whose connection goes before hello is answered: one reconnect loop tries again', async () => {
  // The first connection answers hello only (what else is asked waits there till the test
  // drops it); the second (the first reconnection) goes as its hello arrives, unanswered;
  // every later one answers everything.
  const fake = await standIn((n, req, reply, conn) => {
    if (n === 1) {
      conn.destroy();
      return false;
    }
    if (n === 0 && req.op !== 'hello') return;
    reply(req.op === 'hello' ? fakeHello : req.op === 'get' ? { session: { name: req.session } } : { sessions: [] });
  });
  const { conns, asked } = fake;
  let client;
  try {
    client = await Client.connect({ socket: fake.socket });
    const events = { disconnect: 0, reconnect: 0 };
    client.on('disconnect', () => events.disconnect++);
    client.on('reconnect', () => events.reconnect++);
    const settled = { get: [], stop: [] };
    const note = (op, p) => p.then((v) => settled[op].push(v), (e) => settled[op].push(e));
    // Sent, then lost with the connection: the get is asked again, the stop fails.
    note('get', client.get('s'));
    note('stop', client.stop('s'));
    await until(() => asked[0].length === 3, 5_000, 'the get and the stop');
    const reconnected = once(client, 'reconnect');
    conns[0].destroy();
    await reconnected;
    // Long past the loop's first backoffs: a second loop would have connected by now.
    await new Promise((r) => setTimeout(r, 400));
    assert.equal(conns.length, 3, 'one loop: connections made');
    assert.deepEqual(events, { disconnect: 1, reconnect: 1 });
    assert.equal(settled.get.length, 1);
    assert.deepEqual(settled.get[0], { name: 's' });
    assert.equal(settled.stop.length, 1);
    assert.ok(settled.stop[0] instanceof ConnectionLostError, String(settled.stop[0]));
    // Asked once more, in all, after the first connection.
    assert.equal(asked.slice(1).flat().filter((op) => op === 'get').length, 1);
    // Usable, on the connection it kept.
    assert.deepEqual(await client.list(), []);
    assert.equal(asked[2].at(-1), 'list');
  } finally {
    client?.close();
    await fake.close();
  }
});

test('a connection refused before its hello takes no request with it: one asked while away goes on the next', async () => {
  // The first connection answers hello; the second (the first reconnection) takes what it
  // is sent and goes without an answer, as a daemon at its connection limit does; every
  // later one answers everything.
  const fake = await standIn((n, req, reply, conn) => {
    if (n === 1) {
      setTimeout(() => conn.destroy(), 100);
      return;
    }
    reply(req.op === 'hello' ? fakeHello : { gen: 7 });
  });
  let client;
  try {
    client = await Client.connect({ socket: fake.socket });
    // Asked as the loss is told, before any reconnection: it must wait for a connection
    // whose hello was answered (a `stop` is not asked twice, so one written into the
    // refused connection would fail, though a daemon may have run it).
    let stopped;
    client.once('disconnect', () => (stopped = client.stop('s')));
    const reconnected = once(client, 'reconnect');
    fake.conns[0].destroy();
    await reconnected;
    assert.equal((await stopped).gen, 7);
    assert.deepEqual(fake.asked[1], ['hello']);
    assert.ok(fake.asked.slice(2).flat().includes('stop'), JSON.stringify(fake.asked));
  } finally {
    client?.close();
    await fake.close();
  }
});

/**
 * A stand-in daemon for the tests of a spawn asked while the client reconnects. Its
 * sessions are the names in `sessions`; its generations are numbered across them, and a
 * generation's `spawned` event goes to the connection that spawned it once that follows
 * its session. On the first connection it serves every request. On a reconnection,
 * refusals of a session it does not have (a `subscribe`, a `wait`, ...) are held and
 * written in one write with the answer to the next `spawn`, as a daemon serving them in
 * one turn does: the client reads them in one chunk.
 */
async function spawnStandIn(sessions) {
  let held = [];
  let gens = 0;
  const unannounced = [];
  const line = (body) => JSON.stringify(body) + '\n';
  const fake = await standIn((n, req, reply, conn) => {
    if (req.op === 'hello') return reply(fakeHello);
    if (req.op === 'spawn') {
      const gen = ++gens;
      sessions.add(req.session);
      (unannounced[n] ??= []).push({ event: 'spawned', session: req.session, gen, pid: 1000 + gen });
      conn.write(held.join('') + line({ id: req.id, ok: true, gen }));
      held = [];
      return;
    }
    if (!sessions.has(req.session)) {
      const gone = { id: req.id, ok: false, error: { code: 'no_such_session', message: `no session \`${req.session}\`` } };
      if (n === 0) conn.write(line(gone));
      else held.push(line(gone));
      return;
    }
    if (req.op === 'subscribe') {
      const events = (unannounced[n] ?? []).filter((e) => e.session === req.session);
      unannounced[n] = (unannounced[n] ?? []).filter((e) => e.session !== req.session);
      conn.write(line({ id: req.id, ok: true }) + events.map(line).join(''));
    }
    // A `wait` is answered when the generation ends: never, here.
  });
  return fake;
}

/** Checks that `h` was not failed (nor ended) by what the client read until a `hello` answered now. */
async function assertRunning(client, h) {
  let end = 'running';
  h.wait().then(
    () => (end = 'ended'),
    (e) => (end = e),
  );
  await client.request('hello');
  // A failure reaches `wait` a turn later (see `SessionHandle._reveal`).
  await new Promise((r) => setImmediate(r));
  assert.equal(end, 'running', String(end));
}

test('a spawn asked while reconnecting goes before its subscription, which does not fail it', async () => {
  const fake = await spawnStandIn(new Set());
  let client;
  try {
    client = await Client.connect({ socket: fake.socket });
    // Asked as the loss is told: the spawn and its subscription wait for the next
    // connection. Sent there ahead of the spawn, the subscription would be refused (no
    // session yet), and that refusal, read with the spawn's answer, failed the new handle.
    let spawned;
    client.once('disconnect', () => {
      spawned = client.spawn('s', ['cat']).then(
        (h) => h,
        (e) => e,
      );
    });
    const reconnected = once(client, 'reconnect');
    fake.conns[0].destroy();
    await reconnected;
    const h = await spawned;
    assert.equal(h.gen, 1, String(h));
    assert.deepEqual(fake.asked[1].slice(0, 3), ['hello', 'spawn', 'subscribe']);
    await assertRunning(client, h);
  } finally {
    client?.close();
    await fake.close();
  }
});

test('a subscription refused after a reconnection fails the handles from before it, not a spawn answered after it', async () => {
  const sessions = new Set();
  const fake = await spawnStandIn(sessions);
  let client;
  try {
    client = await Client.connect({ socket: fake.socket });
    const old = await client.spawn('s', ['cat']);
    const oldEnd = old.wait().then(
      () => 'ended',
      (e) => e,
    );
    // Removed while the client is away, and spawned again by it as it comes back: the
    // daemon refuses the resumed subscription, then serves the spawn.
    let spawned;
    client.once('disconnect', () => {
      sessions.delete('s');
      spawned = client.spawn('s', ['cat']).then(
        (h) => h,
        (e) => e,
      );
    });
    const reconnected = once(client, 'reconnect');
    fake.conns[0].destroy();
    await reconnected;
    const h = await spawned;
    assert.equal(h.gen, 2, String(h));
    const end = await oldEnd;
    assert.ok(end instanceof NoSuchSessionError, String(end));
    // The new generation is followed: a subscription of its own, after its spawn.
    await assertRunning(client, h);
    assert.ok(fake.asked[1].lastIndexOf('subscribe') > fake.asked[1].indexOf('spawn'), JSON.stringify(fake.asked[1]));
  } finally {
    client?.close();
    await fake.close();
  }
});
