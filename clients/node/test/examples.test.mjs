// The examples in examples/node run against a real daemon, and the README's Node snippet
// is copied from one of them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Daemon, repoRoot } from './daemon.mjs';

const run = promisify(execFile);
const examples = join(repoRoot, 'examples', 'node');
let daemon;

before(async () => {
  daemon = await Daemon.start();
  // What `npm install` in examples/node does: link the library from clients/node.
  const link = join(examples, 'node_modules', 'genward');
  if (!existsSync(link)) {
    mkdirSync(join(examples, 'node_modules'), { recursive: true });
    symlinkSync(join('..', '..', '..', 'clients', 'node'), link, 'dir');
  }
});

after(async () => {
  await daemon?.stop();
});

async function example(file) {
  const { stdout } = await run(process.execPath, [join(examples, file)], {
    cwd: examples,
    env: { ...process.env, GENWARD_SOCKET: daemon.socket },
    timeout: 30_000,
  });
  return stdout;
}

test('seed 1: a replaced agent whose late exit never reaches its successor', async () => {
  const out = await example('replaced-agent.mjs');
  assert.match(out, /\[gen (\d+)\] late line/);
  const [, oldGen] = out.match(/gen (\d+) ended: code 143, cause superseded/);
  const [, nextGen] = out.match(/agent: gen (\d+) running, unaffected/);
  assert.ok(Number(nextGen) > Number(oldGen));
  assert.match(out, new RegExp(`\\[gen ${nextGen}\\] hello from the new turn`));
  assert.match(out, /^true true$/m);
  assert.match(out, /the old handle is refused: stale_generation/);
});

test('seed 2: the listing survives a failed worker', async () => {
  const out = await example('failed-worker-listing.mjs');
  assert.match(out, /worker-missing: not_found/);
  assert.match(out, /worker-crash: gen \d+ exited with 3/);
  assert.match(out, /worker-ok-\d+ +running/);
  assert.match(out, /worker-missing-\d+ +failed +last: spawn_failed/);
  assert.match(out, /the listing survived the failed workers/);
});

test("the README's Node snippet is copied from an example the tests run", () => {
  const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
  const section = readme.split('### Node')[1];
  assert.ok(section, 'README has a ### Node section');
  const snippet = section.split('```js')[1].split('```')[0];
  const lines = snippet.split('\n').filter((l) => l.trim() !== '');
  assert.ok(lines.length > 0 && lines.length <= 10, `${lines.length} lines`);
  const source = readFileSync(join(examples, 'replaced-agent.mjs'), 'utf8').split('\n');
  for (const line of lines) assert.ok(source.includes(line), `not in replaced-agent.mjs: ${line}`);
});
