// `reload` of a daemon's configuration, with its typed plan and errors, against real daemons.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BadConfigError, Client, GenwardError, NoConfigError } from '../dist/esm/index.js';
import { Daemon } from './daemon.mjs';

const daemons = [];
const clients = [];

after(async () => {
  for (const c of clients) c.close();
  for (const d of daemons) await d.stop();
});

async function daemonWith(args, prepare) {
  const d = new Daemon();
  daemons.push(d);
  prepare?.(d);
  await d.start({ args: args(d) });
  const c = await Client.connect({ socket: d.socket });
  clients.push(c);
  return { d, c };
}

const session = (argv) => JSON.stringify({ argv, grace: '100ms' });

test('reload without --config rejects with NoConfigError', async () => {
  const { c } = await daemonWith(() => []);
  await assert.rejects(c.reload({ dryRun: true }), (e) => {
    assert.ok(e instanceof NoConfigError);
    assert.ok(e instanceof GenwardError);
    assert.equal(e.code, 'no_config');
    return true;
  });
});

test('reload: a dry run plans and changes nothing, a reload applies the plan, a bad config is BadConfigError', async () => {
  let conf;
  const { c } = await daemonWith(
    () => ['--config', conf],
    (d) => {
      conf = join(d.dir, 'conf.d');
      mkdirSync(conf);
      writeFileSync(join(conf, 'keep.json'), session(['sleep', '30']));
      writeFileSync(join(conf, 'web.json'), session(['sleep', '30']));
    },
  );
  const web = await c.get('web');
  const keep = await c.get('keep');

  writeFileSync(join(conf, 'web.json'), session(['sleep', '31']));
  writeFileSync(join(conf, 'db.json'), session(['sleep', '30']));
  const plan = await c.reload({ dryRun: true });
  assert.deepEqual(plan, { dry_run: true, start: ['db'], stop: [], replace: ['web'], busy: [], unchanged: ['keep'] });
  assert.equal((await c.get('web')).current, web.current, 'a dry run replaces nothing');
  assert.deepEqual((await c.list()).map((s) => s.name).sort(), ['keep', 'web'], 'a dry run starts nothing');

  const done = await c.reload();
  assert.deepEqual(done, { dry_run: false, start: ['db'], stop: [], replace: ['web'], busy: [], unchanged: ['keep'] });
  assert.deepEqual((await c.get('web')).spec.argv, ['sleep', '31']);
  assert.notEqual((await c.get('web')).current, web.current);
  assert.equal((await c.get('keep')).current, keep.current, 'an unchanged session keeps its generation');
  assert.ok(await c.get('db'));

  writeFileSync(join(conf, 'db.json'), '{"argv": ["sleep", "30"], "grace": nope}');
  await assert.rejects(c.reload({ dryRun: true }), (e) => {
    assert.ok(e instanceof BadConfigError);
    assert.equal(e.code, 'bad_config');
    assert.match(e.message, /db\.json/);
    return true;
  });
});
