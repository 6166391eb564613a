// Spawn options the client does not know, or in a shape it cannot map, are refused before
// anything is sent; `restart` may be a mode alone, as the CLI and the Python client take it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client, GenwardError, NoSuchSessionError } from '../dist/esm/index.js';
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

test('an unknown spawn option is refused with a TypeError naming it, and nothing is spawned', async () => {
  const refused = async (opts, message) => {
    await assert.rejects(client.spawn('typo', ['sleep', '30'], opts), (e) => {
      assert.ok(e instanceof TypeError, String(e));
      assert.match(e.message, message);
      return true;
    });
  };
  await refused({ kill_grace: 100 }, /unknown option `kill_grace` \(did you mean `killGrace`\?\)/);
  await refused({ grace: '1s', bogus: 1 }, /unknown option `bogus`$/);
  await refused({ bogus: undefined }, /unknown option `bogus`/);
  await refused({ restart: { mode: 'always', max_restarts: 3 } }, /`restart\.max_restarts` \(did you mean `restart\.maxRestarts`\?\)/);
  await refused({ limits: { memoryMax: 1 << 30, cpuMax: { quota: 1 } } }, /unknown option `limits\.cpuMax\.quota`/);
  await refused({ log: { path: '/tmp/x.log', max_size: 4096 } }, /`log\.max_size` \(did you mean `log\.maxSize`\?\)/);
  await refused({ restart: 5 }, /`restart` is a mode \('never', 'on-failure', 'always'\) or an object, not a number/);
  await refused({ restart: ['always'] }, /`restart` is a mode .* not an array/);
  await refused({ limits: 'big' }, /`limits` is an object, not a string/);
  await assert.rejects(client.get('typo'), NoSuchSessionError);
});

test('restart as a mode alone is the policy with that mode; a mode the daemon does not know is refused', async () => {
  await client.spawn('always', ['sleep', '30'], { grace: '100ms', restart: 'always' });
  assert.equal((await client.get('always')).spec.restart.mode, 'always');
  await client.remove('always');
  await assert.rejects(client.spawn('sometimes', ['sleep', '30'], { restart: 'sometimes' }), (e) => {
    assert.ok(e instanceof GenwardError, String(e));
    assert.equal(e.code, 'bad_request');
    assert.match(e.message, /sometimes/);
    return true;
  });
  // `null` is absent, as the protocol reads it: no restarts.
  await client.spawn('none', ['sleep', '30'], { grace: '100ms', restart: null });
  assert.equal((await client.get('none')).spec.restart, undefined);
  await client.remove('none');
});
