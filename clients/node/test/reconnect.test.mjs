// The client across a daemon crash and restart on the same state directory, and across an
// upgrade in place: subscriptions resume from the last position seen, handles keep working.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { renameSync } from 'node:fs';
import { join } from 'node:path';
import { Client, ConnectionLostError } from '../dist/esm/index.js';
import { Daemon, collect, until } from './daemon.mjs';

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
