// Readiness and start order through the typed spawn options, against a real daemon.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client, ReadinessError } from '../dist/esm/index.js';
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

test('ready, dependsOn and live reach the spec, and waitReady resolves once ready', async () => {
  const flag = join(daemon.dir, 'db-ready');
  await client.spawn('db', ['sleep', '30'], {
    grace: '100ms',
    ready: { command: ['test', '-e', flag], interval: '20ms', timeout: '20s' },
    live: { command: ['true'], interval: '5s', failures: 2 },
  });
  const web = client.spawn('web', ['sleep', '30'], { grace: '100ms', dependsOn: { db: 'ready' } });
  const spec = (await client.get('db')).spec;
  assert.deepEqual(spec.ready, { command: ['test', '-e', flag], timeout: 20000, interval: 20 });
  assert.deepEqual(spec.live, { command: ['true'], interval: 5000, failures: 2 });
  assert.equal((await client.get('web')).waiting, 'waiting for db to be ready');
  writeFileSync(flag, '');
  const ready = await client.waitReady('db');
  assert.equal(ready.event, 'ready');
  const h = await web;
  assert.ok(h.gen > 0);
});

test('waitReady rejects with the reason when readiness fails', async () => {
  await client.spawn('late', ['sleep', '30'], { grace: '100ms', ready: { output: 'never', timeout: '50ms' } });
  await assert.rejects(client.waitReady('late'), (e) => {
    assert.ok(e instanceof ReadinessError);
    assert.equal(e.event.event, 'ready_failed');
    assert.match(e.message, /timed out after 50ms/);
    return true;
  });
});
