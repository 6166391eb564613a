// Seed 1: an agent's turn is replaced while the old process is still draining. Its late
// output and its exit (143 after SIGTERM) must reach only its own handle: the successor's
// handle sees neither, and the old handle can no longer touch the session.
//
//   genward daemon &            # or GENWARD_SOCKET=... pointing at one
//   npm install                 # links the library from clients/node (build it first)
//   node replaced-agent.mjs
import { Client, StaleGenerationError } from 'genward';

const fail = (why) => {
  console.error(`FAIL: ${why}`);
  process.exit(1);
};
// The first turn: on SIGTERM it keeps writing for a while, then exits 143.
const draining = 'trap "echo still draining; sleep 0.5; echo late line; exit 143" TERM; echo working; while :; do sleep 0.05; done';

const client = await Client.connect(); // GENWARD_SOCKET, or the CLI's default socket
const old = await client.spawn('agent', ['sh', '-c', draining]); // drains for a while after SIGTERM
old.onData((d) => process.stdout.write(`[gen ${old.gen}] ${d}`));
await new Promise((r) => setTimeout(r, 200));

// The next turn starts at once ('overlap'); the old one is stopped meanwhile.
const next = await client.spawn('agent', ['cat'], { onBusy: 'overlap' });
next.onData((d) => process.stdout.write(`[gen ${next.gen}] ${d}`));
const guard = next.onExit((e) => fail(`the successor got an exit: ${JSON.stringify(e)}`));
await next.write('hello from the new turn\n');

const end = await old.wait(); // the late exit arrives, attributed to its own generation
console.log(`gen ${end.gen} ended: code ${end.code}, cause ${end.cause}`);
if (end.gen !== old.gen || end.cause !== 'superseded') fail('the old exit was misattributed');

const late = await old.write('typed for the old turn\n').catch((e) => e);
console.log(end.gen === old.gen, late instanceof StaleGenerationError); // true true
if (!(late instanceof StaleGenerationError)) fail('a write on the old handle was not refused');
console.log(`the old handle is refused: ${late.code}`);

await next.write('the successor still runs\n');
const s = await client.get('agent');
if (s.current !== next.gen || s.state !== 'running') fail(`the session moved: ${JSON.stringify(s)}`);
console.log(`agent: gen ${s.current} ${s.state}, unaffected`);

guard.dispose();
await next.closeInput();
await next.wait();
await client.remove('agent');
client.close();
