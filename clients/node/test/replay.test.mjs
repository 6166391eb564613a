// Replay (from_start, tail, from_pos, from_gen) and `dropped` surfaced as an event.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, ConnectionLostError } from '../dist/esm/index.js';
import { Daemon } from './daemon.mjs';

let daemon;
let client;

before(async () => {
  daemon = await Daemon.start();
  client = await Client.connect({ socket: daemon.socket });
});

after(async () => {
  client?.close();
  await daemon?.stop();
});

async function replayed(name, opts) {
  const outputs = [];
  const events = [];
  for await (const r of client.replay(name, opts)) {
    if (r.type === 'output') outputs.push(r);
    else events.push(r);
  }
  return { outputs, events, text: Buffer.concat(outputs.map((o) => o.data)).toString('latin1') };
}

test('replay from the start, a tail, a position and a generation', async () => {
  const first = await client.spawn('log', ['printf', 'one\\ntwo\\n']);
  await first.wait();
  const second = await client.spawn('log', ['printf', 'three\\377\\n']);
  await second.wait();

  const all = await replayed('log', { fromStart: true });
  assert.equal(all.text, 'one\ntwo\nthree\xff\n');
  assert.deepEqual(
    all.outputs.map((o) => o.gen),
    all.outputs.map((o) => (o.pos < 8 ? first.gen : second.gen)),
  );
  const kinds = all.events.map((e) => `${e.event}:${e.gen}`);
  for (const k of [`spawned:${first.gen}`, `exited:${first.gen}`, `spawned:${second.gen}`, `exited:${second.gen}`]) {
    assert.ok(kinds.includes(k), `${k} in ${kinds}`);
  }

  const tail = await replayed('log', { tail: 7 });
  assert.ok(tail.text.endsWith('three\xff\n'));
  assert.ok(tail.text.length <= all.text.length);

  const fromPos = await replayed('log', { fromPos: 4 });
  assert.equal(fromPos.text, 'two\nthree\xff\n');
  assert.equal(fromPos.outputs[0].pos, 4);

  const fromGen = await replayed('log', { fromGen: second.gen });
  assert.equal(fromGen.text, 'three\xff\n');
});

test('a replay that follows ends when the caller stops it', async () => {
  const h = await client.spawn('follow', ['sh', '-c', 'echo a; read x; echo b']);
  const it = client.replay('follow', { fromStart: true, follow: true });
  let text = '';
  for await (const r of it) {
    if (r.type === 'output') text += r.data.toString();
    if (text === 'a\n') await h.write('\n');
    if (text === 'a\nb\n') break;
  }
  assert.equal(text, 'a\nb\n');
  await h.wait();
});

test('closing the client ends a following replay with ConnectionLostError', async () => {
  const own = await Client.connect({ socket: daemon.socket });
  await own.spawn('quiet', ['sleep', '100']);
  const it = own.replay('quiet', { fromStart: true, follow: true });
  const seen = (async () => {
    for await (const r of it) {
      if (r.type === 'event' && r.event === 'spawned') own.close();
    }
  })();
  await assert.rejects(seen, ConnectionLostError);
  await client.stop('quiet');
});

test('a reader that falls behind gets `dropped`, then what is retained', async () => {
  const file = join(daemon.dir, 'drop.bin');
  writeFileSync(file, randomBytes(24 * 1024 * 1024));
  const slow = await Client.connect({ socket: daemon.socket, highWaterMark: 64 * 1024 });
  try {
    const h = await slow.spawn('lossy', ['cat', file], { buffer: 256 * 1024 });
    const dropped = [];
    h.on('dropped', (d) => dropped.push(d));
    const clientDropped = [];
    slow.on('dropped', (d) => clientDropped.push(d));
    const it = h.outputChunks();
    // Read one chunk, then nothing until the process is long done: the reads pause.
    const first = await it.next();
    assert.equal(first.done, false);
    await new Promise((r) => setTimeout(r, 300));
    let got = first.value.data.length;
    let next = first.value.pos + first.value.data.length;
    for await (const c of it) {
      if (c.pos !== next) {
        // Every gap was announced, in order, before the bytes after it.
        assert.ok(dropped.some((d) => d.from <= next && d.to === c.pos), `gap ${next}..${c.pos} announced`);
      }
      got += c.data.length;
      next = c.pos + c.data.length;
    }
    assert.ok(dropped.length > 0, 'some output was dropped');
    assert.deepEqual(clientDropped, dropped);
    assert.ok(got < 24 * 1024 * 1024);
    assert.equal((await h.wait()).code, 0);
  } finally {
    slow.close();
  }
});

test('a lossless reader that takes nothing is demoted, and told so', async () => {
  const file = join(daemon.dir, 'demote.bin');
  writeFileSync(file, randomBytes(16 * 1024 * 1024));
  const stalled = await Client.connect({ socket: daemon.socket, lossless: true, demoteAfter: '300ms', highWaterMark: 64 * 1024 });
  try {
    const h = await stalled.spawn('demote', ['cat', file]);
    const demoted = [];
    const dropped = [];
    h.on('demoted', (d) => demoted.push(d));
    h.on('dropped', (d) => dropped.push(d));
    const it = h.output();
    await it.next();
    // Take nothing: after 300 ms the daemon lets the output flow again without us.
    await new Promise((r) => setTimeout(r, 1500));
    for await (const _ of it);
    assert.equal(demoted.length, 1);
    assert.equal(typeof demoted[0].pos, 'number');
    assert.ok(dropped.length > 0, 'what the demoted reader missed is reported');
    assert.equal((await h.wait()).code, 0);
  } finally {
    stalled.close();
  }
});
