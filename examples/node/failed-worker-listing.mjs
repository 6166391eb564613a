// Seed 2: one worker fails (it cannot start, or it crashes), and a worker that ended long
// ago is "stopped" again. None of that reaches another process, and the global listing
// still answers for every worker, failed ones included.
//
//   genward daemon &            # or GENWARD_SOCKET=... pointing at one
//   npm install                 # links the library from clients/node (build it first)
//   node failed-worker-listing.mjs
import { Client, SpawnFailedError, StaleGenerationError } from 'genward';

const client = await Client.connect();
const tag = process.pid;
const fail = (why) => {
  console.error(`FAIL: ${why}`);
  process.exit(1);
};

const healthy = await client.spawn(`worker-ok-${tag}`, ['sleep', '60']);

// A worker that cannot start: the spawn rejects with the reason, no made-up exit code.
const missing = await client.spawn(`worker-missing-${tag}`, ['no-such-worker-binary']).catch((e) => e);
if (!(missing instanceof SpawnFailedError)) fail('the failed start was not reported');
console.log(`worker-missing: ${missing.kind} (${missing.reason.message})`);

// A worker that crashes.
const crashed = await client.spawn(`worker-crash-${tag}`, ['sh', '-c', 'exit 3']);
const end = await crashed.wait();
console.log(`worker-crash: gen ${end.gen} exited with ${end.code}`);

// Stopping the crashed worker's generation again: refused, nothing is signalled, whoever
// has its old pid by now.
const again = await crashed.stop().catch((e) => e);
if (!(again instanceof StaleGenerationError)) fail('a stop of an ended generation was not refused');

// The listing answers for every worker.
const sessions = (await client.list()).filter((s) => s.name.endsWith(`-${tag}`));
for (const s of sessions) {
  const last = s.last_end ? `last: ${s.last_end.cause}${s.last_end.code == null ? '' : ` ${s.last_end.code}`}` : '';
  console.log(`${s.name.padEnd(24)} ${s.state.padEnd(8)} ${last}`);
}
const states = Object.fromEntries(sessions.map((s) => [s.name.replace(`-${tag}`, ''), s.state]));
if (states['worker-ok'] !== 'running' || states['worker-missing'] !== 'failed' || states['worker-crash'] !== 'failed') {
  fail(`unexpected listing: ${JSON.stringify(states)}`);
}
console.log('the listing survived the failed workers');

await healthy.stop({ grace: '1s' });
await healthy.wait();
for (const s of sessions) await client.remove(s.name);
client.close();
