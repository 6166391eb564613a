// A session handle against a real daemon: start, output, input, terminal size, signals,
// stop, wait, and a handle refused once its generation was replaced.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  Client,
  SpawnFailedError,
  StaleGenerationError,
  NoSuchSessionError,
  defaultSocketPath,
} from '../dist/esm/index.js';
import { Daemon, collect, fakeHello, standIn, until } from './daemon.mjs';

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

test('the default socket follows the CLI: GENWARD_SOCKET, then GENWARD_STATE_DIR, then the default', async () => {
  assert.equal(defaultSocketPath({ GENWARD_SOCKET: '/x/y.sock', GENWARD_STATE_DIR: '/s' }), '/x/y.sock');
  assert.equal(defaultSocketPath({ GENWARD_STATE_DIR: '/s' }), '/s/genward.sock');
  if (process.geteuid() !== 0) {
    assert.equal(defaultSocketPath({ XDG_RUNTIME_DIR: '/run/user/7' }), '/run/user/7/genward/genward.sock');
    assert.throws(() => defaultSocketPath({}), /XDG_RUNTIME_DIR/);
  } else {
    assert.equal(defaultSocketPath({ XDG_RUNTIME_DIR: '/run/user/7' }), '/run/genward/genward.sock');
  }
  const saved = process.env.GENWARD_SOCKET;
  process.env.GENWARD_SOCKET = daemon.socket;
  try {
    const c = await Client.connect();
    assert.equal(c.socketPath, daemon.socket);
    assert.equal(c.hello.protocol, 1);
    assert.ok(c.hello.capabilities.includes('if_gen'));
    c.close();
  } finally {
    if (saved === undefined) delete process.env.GENWARD_SOCKET;
    else process.env.GENWARD_SOCKET = saved;
  }
});

test('a capability the daemon lacks is refused at connect', async () => {
  await assert.rejects(Client.connect({ socket: daemon.socket, capabilities: ['teleport'] }), /lacks capabilities: teleport/);
});

test('spawn resolves once the process started, with its pid and generation', async () => {
  const h = await client.spawn('ok', ['sleep', '30'], { grace: '100ms' });
  assert.equal(typeof h.pid, 'number');
  assert.ok(h.gen > 0);
  const s = await client.get('ok');
  assert.equal(s.current, h.gen);
  assert.equal(s.generations[0].pid, h.pid);
  await h.stop();
  await h.wait();
});

test('spawn rejects with the spawn_failed reason', async () => {
  await assert.rejects(client.spawn('missing', ['genward-no-such-program']), (e) => {
    assert.ok(e instanceof SpawnFailedError);
    assert.equal(e.code, 'spawn_failed');
    assert.equal(e.kind, 'not_found');
    assert.equal(e.errno, 2);
    assert.equal(e.session, 'missing');
    assert.match(e.message, /genward-no-such-program/);
    return true;
  });
  await assert.rejects(client.spawn('nodir', ['true'], { cwd: '/nonexistent/dir' }), (e) => {
    assert.ok(e instanceof SpawnFailedError);
    assert.match(e.reason.message, /nonexistent/);
    return true;
  });
  // The listing is not poisoned by it.
  const names = (await client.list()).map((s) => s.name);
  assert.ok(names.includes('missing'));
});

test('a refused request is a typed error', async () => {
  await assert.rejects(client.get('nobody-here'), NoSuchSessionError);
  await assert.rejects(client.spawn('bad name!', ['true']), (e) => e.code === 'bad_request');
});

test('output is byte-exact, invalid UTF-8 and NUL included', async () => {
  const h = await client.spawn('bytes', ['printf', 'a\\377\\376\\000b\\303(\\n{"x"}\\r\\n\\342\\202']);
  const out = collect(h);
  const end = await h.wait();
  assert.deepEqual(end, { session: 'bytes', gen: h.gen, code: 0, signal: null, cause: 'exited', discarded: 0, truncated: false });
  assert.deepEqual(out.get(), Buffer.from([0x61, 0xff, 0xfe, 0x00, 0x62, 0xc3, 0x28, 0x0a, ...Buffer.from('{"x"}\r\n'), 0xe2, 0x82]));
});

test('a 64 MiB flood arrives byte-exact through async iteration (lossless)', async () => {
  const file = join(daemon.dir, 'flood.bin');
  const data = randomBytes(64 * 1024 * 1024);
  writeFileSync(file, data);
  const want = createHash('sha256').update(data).digest('hex');
  const lossless = await Client.connect({ socket: daemon.socket, lossless: true, highWaterMark: 4 << 20 });
  try {
    const h = await lossless.spawn('flood', ['cat', file]);
    const dropped = [];
    h.on('dropped', (d) => dropped.push(d));
    const hash = createHash('sha256');
    const it = h.output();
    const first = await it.next();
    hash.update(first.value);
    let n = first.value.length;
    // A reader that stops: its iterator fills, the client stops reading, and the daemon
    // holds the output back, so `cat` cannot finish meanwhile.
    await new Promise((r) => setTimeout(r, 500));
    const meanwhile = await client.get('flood');
    assert.equal(meanwhile.state, 'running');
    assert.ok(meanwhile.generations[0].offsets.stdout < data.length);
    for await (const chunk of it) {
      hash.update(chunk);
      n += chunk.length;
    }
    assert.equal(n, data.length);
    assert.equal(hash.digest('hex'), want);
    assert.deepEqual(dropped, []);
    assert.equal((await h.wait()).code, 0);
  } finally {
    lossless.close();
  }
});

test('input reaches the process byte-exact; closeInput ends it', async () => {
  const h = await client.spawn('echo', ['cat']);
  const out = collect(h);
  const bytes = Buffer.from([0, 1, 2, 0xff, 0xfe, 0x0a, 0x80]);
  await h.write(bytes);
  await h.write('héllo\n');
  const big = randomBytes(700 * 1024);
  await h.write(big);
  await until(() => out.get().length >= bytes.length + 7 + big.length, 10_000, 'echoed input');
  assert.deepEqual(out.get(), Buffer.concat([bytes, Buffer.from('héllo\n'), big]));
  await h.closeInput();
  const end = await h.wait();
  assert.equal(end.code, 0);
  assert.equal(end.cause, 'exited');
});

test('resize reaches a PTY session (stty size)', async () => {
  const h = await client.spawn('tty', ['sh', '-c', 'stty size; read x; stty size; read y'], { rows: 24, cols: 80 });
  assert.equal(h.cols, 80);
  const out = collect(h);
  await until(() => out.text().includes('24 80'), 10_000, 'the first size');
  await h.resize(132, 50);
  assert.equal(h.cols, 132);
  assert.equal(h.rows, 50);
  await h.write('\n');
  await until(() => out.text().includes('50 132'), 10_000, 'the new size');
  await h.write('\n');
  assert.equal((await h.wait()).code, 0);
});

test('an attached terminal that goes gives the session back the size of the one attached before it', async () => {
  const h = await client.spawn('sizes', ['sh', '-c', "trap 'stty size' WINCH; echo ready; while :; do sleep 0.05; done"], { rows: 24, cols: 80 });
  const out = collect(h);
  await until(() => out.text().includes('ready'), 10_000, 'ready');
  await h.resize(90, 20, { attached: true });
  await until(() => out.text().includes('20 90'), 10_000, 'the first terminal\'s size');
  const other = await Client.connect({ socket: daemon.socket });
  await other.request('resize', { session: 'sizes', if_gen: h.gen, rows: 30, cols: 100, attached: true });
  await until(() => out.text().includes('30 100'), 10_000, 'the second terminal\'s size');
  const before = out.text().length;
  other.close();
  await until(() => out.text().slice(before).includes('20 90'), 10_000, 'the first size again');
  await h.stop({ grace: '100ms' });
  await h.wait();
});

test('kill sends a signal; stop ends with cause stopped; wait gives the same end to everyone', async () => {
  const h = await client.spawn('sig', ['sh', '-c', 'trap "echo got-usr1; exit 5" USR1; echo ready; while :; do sleep 0.05; done']);
  const out = collect(h);
  await until(() => out.text().includes('ready'), 10_000, 'ready');
  const exits = [];
  h.onExit((e) => exits.push(e));
  await h.kill('USR1');
  const end = await h.wait();
  assert.equal(end.code, 5);
  assert.equal(end.cause, 'exited');
  assert.ok(out.text().includes('got-usr1'));
  assert.deepEqual(exits, [end]);
  assert.deepEqual(await h.wait(), end);
  // onExit after the end still fires, once.
  const late = await new Promise((r) => h.onExit(r));
  assert.deepEqual(late, end);

  const s = await client.spawn('stopme', ['sleep', '60']);
  await s.stop({ grace: '2s' });
  const e2 = await s.wait();
  assert.equal(e2.cause, 'stopped');
  assert.equal(e2.code, 143);
  assert.equal(e2.signal, 'SIGTERM');
});

test('a handle of a replaced generation is refused and never reaches its successor', async () => {
  const old = await client.spawn('agent', ['sh', '-c', 'trap "" TERM; cat'], { grace: '300ms', killGrace: '300ms' });
  const oldOut = collect(old);
  const oldExit = old.wait();
  const next = await client.spawn('agent', ['cat']);
  assert.ok(next.gen > old.gen);
  const nextOut = collect(next);
  let nextExited = false;
  next.onExit(() => (nextExited = true));
  for (const call of [() => old.write('typed for the old one\n'), () => old.kill('INT'), () => old.stop(), () => old.closeInput()]) {
    await assert.rejects(call(), (e) => {
      assert.ok(e instanceof StaleGenerationError, String(e));
      assert.equal(e.code, 'stale_generation');
      return true;
    });
  }
  const end = await oldExit;
  assert.equal(end.gen, old.gen);
  assert.equal(end.cause, 'superseded');
  await next.write('for the successor\n');
  await until(() => nextOut.text() === 'for the successor\n', 10_000, 'the successor echo');
  assert.equal(oldOut.text(), '');
  assert.equal(nextExited, false);
  assert.equal(next.hasExited, false);
  await next.closeInput();
  assert.equal((await next.wait()).cause, 'exited');
});

test('a handle of a removed session is refused with NoSuchSessionError, not StaleGenerationError', async () => {
  const h = await client.spawn('removed', ['sleep', '1000']);
  await client.remove('removed');
  assert.equal((await h.wait()).cause, 'stopped');
  await until(
    () => client.get('removed').then(() => false, (e) => e instanceof NoSuchSessionError),
    10_000,
    'the session gone',
  );
  for (const call of [() => h.write('x'), () => h.kill(), () => h.stop(), () => h.closeInput()]) {
    await assert.rejects(call(), (e) => {
      assert.ok(e instanceof NoSuchSessionError, String(e));
      assert.ok(!(e instanceof StaleGenerationError));
      return true;
    });
  }
});

test('restart gives the handle of the new generation; the old handle may not restart again', async () => {
  const first = await client.spawn('again', ['sh', '-c', 'echo run $GENWARD_GEN; exec cat']);
  const firstOut = collect(first);
  await until(() => firstOut.text().startsWith('run '), 10_000, 'the first run');
  const second = await first.restart();
  assert.ok(second.gen > first.gen);
  assert.equal((await first.wait()).cause, 'superseded');
  const out = collect(second);
  await second.write('again\n');
  await until(() => out.text() === 'again\n' || out.text().endsWith('again\n'), 10_000, 'the echo');
  await assert.rejects(first.restart(), StaleGenerationError);
  const s = await client.get('again');
  assert.equal(s.current, second.gen);
  await second.closeInput();
  assert.equal((await second.wait()).code, 0);
});

test('requests are pipelined and matched by id', async () => {
  const h = await client.spawn('pipe', ['cat']);
  const out = collect(h);
  const writes = [];
  for (let i = 0; i < 200; i++) writes.push(h.write(`${i}\n`));
  const gets = Array.from({ length: 50 }, () => client.get('pipe'));
  const [listed, ...rest] = await Promise.all([client.list(), ...gets, ...writes]);
  assert.ok(listed.some((s) => s.name === 'pipe'));
  for (const g of rest.slice(0, 50)) assert.equal(g.name, 'pipe');
  const want = Array.from({ length: 200 }, (_, i) => `${i}\n`).join('');
  await until(() => out.text() === want, 10_000, 'all lines in order');
  await h.closeInput();
  await h.wait();
});

test('list and get are typed, and list reads every page', async () => {
  for (let i = 0; i < 5; i++) await (await client.spawn(`many-${i}`, ['true'])).wait();
  const all = await client.list();
  const mine = all.filter((s) => s.name.startsWith('many-'));
  assert.equal(mine.length, 5);
  for (const s of mine) {
    assert.equal(s.state, 'exited');
    assert.equal(s.current, null);
    assert.equal(s.last_end.code, 0);
    // An ended generation stays listed, `reported`, until its tree is found empty.
    assert.ok(s.generations.every((g) => g.lifecycle === 'reported'), JSON.stringify(s));
  }
  const one = await client.get('many-0');
  assert.deepEqual(one.spec.argv, ['true']);
  assert.equal(one.recent_ends.length, 1);
});

test('attach follows a generation spawned elsewhere, from its retained output', async () => {
  const other = await Client.connect({ socket: daemon.socket });
  const h0 = await other.spawn('shared', ['sh', '-c', 'echo first; read x; echo second $x']);
  const h = await client.attach('shared');
  assert.equal(h.gen, h0.gen);
  assert.equal(h.pid, h0.pid);
  const out = collect(h);
  await until(() => out.text() === 'first\n', 10_000, 'the replayed line');
  await h.write('x\n');
  const end = await h.wait();
  assert.equal(end.code, 0);
  assert.equal(out.text(), 'first\nsecond x\n');
  other.close();
});

test('a relative cwd is the caller\'s, not the daemon\'s', async () => {
  // Somewhere the daemon (started from here) is not.
  const was = process.cwd();
  const here = realpathSync(tmpdir());
  process.chdir(here);
  try {
    const h = await client.spawn('relcwd', ['sh', '-c', 'pwd -P'], { cwd: '.' });
    const out = collect(h);
    await h.wait();
    assert.equal(out.text(), `${here}\n`);
    const { spec } = await client.get('relcwd');
    assert.equal(spec.cwd, here);
  } finally {
    process.chdir(was);
  }
});

test('spawn options reach the daemon as the protocol spells them', async () => {
  const h = await client.spawn('opts', ['sh', '-c', 'echo "$GREETING $PWD"; exit 1'], {
    env: { GREETING: 'hi' },
    cwd: '/',
    stderr: 'merge',
    grace: '2s',
    killGrace: 1500,
    stopSignal: 'INT',
    restart: { mode: 'on-failure', initial: '10s', maxRestarts: 2, resetAfter: '1m' },
    buffer: 65536,
  });
  const out = collect(h);
  assert.equal((await h.wait()).code, 1);
  assert.equal(out.text(), 'hi /\n');
  const { spec } = await client.get('opts');
  assert.equal(spec.cwd, '/');
  assert.equal(spec.env.GREETING, 'hi');
  assert.equal(spec.stderr, 'merge');
  assert.equal(spec.restart.mode, 'on-failure');
  assert.equal(spec.restart.max_restarts, 2);
  await client.stop('opts');
});

test('run-as options reach the daemon: user, group, umask, envFile, rlimits', async () => {
  const envFile = join(daemon.dir, 'app.env');
  writeFileSync(envFile, 'FROM_FILE=yes\n');
  const uid = process.geteuid();
  const gid = process.getegid();
  const script = 'echo "u=$(id -u) g=$(id -g) m=$(umask) n=$(ulimit -n) c=$(ulimit -c) f=$FROM_FILE"';
  const run = async (name, opts) => {
    const h = await client.spawn(name, ['sh', '-c', script], opts);
    const out = collect(h);
    assert.equal((await h.wait()).code, 0);
    return out.text().trim();
  };
  const opts = { user: uid, group: gid, envFile, rlimits: { nofile: 321, core: { soft: 0, hard: 'infinity' } } };
  assert.equal(await run('runas', { ...opts, umask: '027' }), `u=${uid} g=${gid} m=0027 n=321 c=0 f=yes`);
  // A mode given as a number goes as its octal digits.
  assert.equal(await run('runas', { ...opts, umask: 0o077 }), `u=${uid} g=${gid} m=0077 n=321 c=0 f=yes`);
  const { spec } = await client.get('runas');
  assert.equal(spec.umask, '077');
  assert.equal(spec.env_file, envFile);
  assert.deepEqual(spec.rlimits, { core: { soft: 0, hard: 'infinity' }, nofile: 321 });
  // An unknown user is looked up at the start, which fails naming the field.
  await assert.rejects(client.spawn('nobody-here', ['true'], { user: 'genward-no-such-user' }), (e) => {
    assert.ok(e instanceof SpawnFailedError, String(e));
    assert.match(e.message, /user: no user named `genward-no-such-user`/);
    return true;
  });
  await assert.rejects(client.spawn('bad-umask', ['true'], { umask: 0o1000 }), RangeError);
});

test('the CommonJS build loads with require()', async () => {
  const { createRequire } = await import('node:module');
  const require = createRequire(import.meta.url);
  const cjs = require('../dist/cjs/index.js');
  assert.equal(typeof cjs.Client.connect, 'function');
  assert.equal(typeof cjs.StaleGenerationError, 'function');
  const c = await cjs.Client.connect({ socket: daemon.socket });
  assert.equal(c.hello.protocol, 1);
  c.close();
});

test('a long write to a slow reader: the process gets all of it, in order', async () => {
  // Reads slowly, then says how much it got and its hash.
  const reader = `
    const h = require('crypto').createHash('sha256'); let n = 0;
    process.stdin.on('data', (b) => { h.update(b); n += b.length; process.stdin.pause(); setTimeout(() => process.stdin.resume(), 2); });
    process.stdin.on('end', () => console.log(n, h.digest('hex')));`;
  const h = await client.spawn('slow-reader', [process.execPath, '-e', reader]);
  const out = collect(h);
  const data = randomBytes(6 << 20);
  // More than the daemon queues (1 MiB): the write waits for the reader as it goes.
  await h.write(data);
  await h.closeInput();
  await h.wait();
  const [n, hex] = out.text().trim().split(' ');
  assert.equal(Number(n), data.length);
  assert.equal(createHash('sha256').update(data).digest('hex'), hex);
});

test('a write waits for room in the daemon\'s input queue: 3 MiB to a process that reads nothing until let go', async () => {
  const go = join(daemon.dir, 'room-go');
  const got = join(daemon.dir, 'room-got');
  const script = 'while [ ! -e "$1" ]; do sleep 0.01; done; exec cat > "$2"';
  const h = await client.spawn('room', ['sh', '-c', script, 'sh', go, got]);
  // The process is let go once the daemon refused a piece for want of room: from then on
  // the write can only go on by waiting for it.
  let full = 0;
  client.request = function (op, args) {
    const asked = Client.prototype.request.call(this, op, args);
    if (op === 'write') {
      asked.catch((e) => {
        if (e.code === 'limit' && full++ === 0) writeFileSync(go, '');
      });
    }
    return asked;
  };
  try {
    const data = randomBytes(3 << 20);
    await h.write(data);
    assert.ok(full > 0, 'a piece found the queue full');
    await h.closeInput();
    assert.equal((await h.wait()).code, 0);
    assert.ok(readFileSync(got).equals(data), 'the bytes, in order');
  } finally {
    delete client.request;
  }
});

test('an output iterator gets `dropped` in place: after the output from before the gap, before the output after it', async () => {
  // A stand-in daemon: the generation's output, a gap, more output, then its end, at once.
  const frame = (pos, text) => {
    const header = { event: 'output', session: 'gappy', gen: 1, stream: 'stdout', offset: pos, pos, t: 0, len: text.length };
    return JSON.stringify(header) + '\n' + text + '\n';
  };
  const event = (body) => JSON.stringify({ session: 'gappy', gen: 1, ...body }) + '\n';
  const end = { event: 'exited', session: 'gappy', gen: 1, code: 0, signal: null, cause: 'exited' };
  const fake = await standIn((n, req, reply, conn) => {
    if (req.op === 'hello') return reply(fakeHello);
    if (req.op === 'spawn') return reply({ gen: 1 });
    if (req.op !== 'wait') return reply({});
    conn.write(
      event({ event: 'spawned', pid: 4242 }) +
        frame(0, 'before') +
        event({ event: 'dropped', from: 6, to: 20, gen: undefined }) +
        frame(20, 'after') +
        event(end),
    );
    reply({ end });
  });
  const c = await Client.connect({ socket: fake.socket, reconnect: false });
  try {
    const h = await c.spawn('gappy', ['x']);
    const seen = [];
    h.on('dropped', (d) => seen.push(`dropped ${d.from}-${d.to}`));
    for await (const chunk of h.outputChunks()) seen.push(`output ${chunk.pos} ${chunk.data}`);
    assert.deepEqual(seen, ['output 0 before', 'dropped 6-20', 'output 20 after']);
    assert.equal((await h.wait()).code, 0);
  } finally {
    c.close();
    await fake.close();
  }
});
