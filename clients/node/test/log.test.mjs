// The `log` spawn option, hello's `log_writer`, and the per-generation readiness and liveness
// events on a handle, against a real daemon.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '../dist/esm/index.js';
import { Daemon, until } from './daemon.mjs';

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

const read = (p) => {
  try {
    return readFileSync(p, 'utf8');
  } catch {
    return '';
  }
};

test('log: the typed option reaches the spec and the file gets the output', async () => {
  const path = join(daemon.dir, 'app.log');
  const h = await client.spawn('logged', ['sh', '-c', 'echo hello-log; echo oops >&2'], { log: { path, maxSize: 4096, keep: 2 } });
  assert.deepEqual((await client.get('logged')).spec.log, { path, max_size: 4096, keep: 2 });
  await h.wait();
  // The log writer writes off the daemon's loop: no event says when, so look.
  await until(() => read(path).includes('hello-log') && read(path).includes('oops'), 10_000, 'the log file');
});

test('hello reports the log writer', async () => {
  const hello = await client.request('hello');
  assert.equal(typeof hello.log_writer.restarts, 'number');
  assert.equal(typeof hello.log_writer.dropped_bytes, 'number');
  assert.equal(hello.log_writer.dropped_bytes, 0);
  assert.equal(typeof client.hello.log_writer?.restarts, 'number');
});

test('a handle reports unhealthy, then its exit as stopped', async () => {
  const h = await client.spawn('sick', ['sleep', '30'], { grace: '100ms', live: { command: ['false'], interval: '20ms', failures: 2 } });
  const sick = await new Promise((resolve) => h.onUnhealthy(resolve));
  assert.equal(sick.session, 'sick');
  assert.equal(sick.gen, h.gen);
  assert.equal(sick.failures, 2);
  assert.equal((await h.wait()).cause, 'stopped');
});

test('a handle reports ready and ready_failed', async () => {
  const up = await client.spawn('up', ['sh', '-c', 'echo up; exec sleep 30'], { grace: '100ms', ready: { output: 'up' } });
  const ready = await new Promise((resolve) => up.onReady(resolve));
  assert.equal(ready.gen, up.gen);
  const late = await client.spawn('late', ['sleep', '30'], { grace: '100ms', ready: { output: 'never', timeout: '50ms' } });
  const failed = await new Promise((resolve) => late.onReadyFailed(resolve));
  assert.equal(failed.gen, late.gen);
  assert.match(failed.reason, /timed out after 50ms/);
  await Promise.all([up.stop(), late.stop()]);
});
