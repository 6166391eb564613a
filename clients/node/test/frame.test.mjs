// The frame decoder on its own: JSON lines and output frames cut at every possible place.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FrameDecoder, ProtocolError } from '../dist/esm/index.js';

const payload = Buffer.from([0x0a, 0x7b, 0x00, 0xff, 0x0a, 0x7d]); // "\n{" NUL 0xff "\n}"
const stream = Buffer.concat([
  Buffer.from('{"id":1,"ok":true,"protocol":1}\n'),
  Buffer.from(`{"event":"output","session":"s","gen":2,"stream":"stdout","offset":0,"pos":0,"len":${payload.length}}\n`),
  payload,
  Buffer.from('\n'),
  Buffer.from('{"event":"exited","session":"s","gen":2,"code":0,"signal":null,"cause":"exited","future":[1]}\r\n'),
  Buffer.from('{"event":"output","session":"s","gen":2,"stream":"stdout","offset":6,"pos":6,"len":0}\n\n'),
]);

function decode(chunks) {
  const d = new FrameDecoder();
  const out = [];
  for (const c of chunks) d.push(c, (m) => out.push(m));
  return out;
}

test('every split of the stream decodes to the same messages', () => {
  const whole = decode([stream]);
  assert.deepEqual(
    whole.map((m) => m.kind),
    ['response', 'output', 'event', 'output'],
  );
  assert.deepEqual(whole[1].data, payload);
  assert.equal(whole[2].body.future[0], 1);
  assert.equal(whole[3].data.length, 0);
  for (let i = 0; i <= stream.length; i++) {
    for (const j of [i, Math.min(stream.length, i + 1), Math.min(stream.length, i + 7)]) {
      const parts = [stream.subarray(0, i), stream.subarray(i, j), stream.subarray(j)];
      assert.deepEqual(decode(parts), whole, `split at ${i}, ${j}`);
    }
  }
  assert.deepEqual(decode([...stream].map((b) => Buffer.from([b]))), whole);
});

test('a frame not followed by a newline means the stream is out of step', () => {
  const bad = Buffer.from('{"event":"output","session":"s","gen":1,"stream":"stdout","offset":0,"pos":0,"len":2}\nabX');
  assert.throws(() => decode([bad]), ProtocolError);
});

test('a line that is not a JSON object is refused', () => {
  assert.throws(() => decode([Buffer.from('[1,2]\n')]), ProtocolError);
  assert.throws(() => decode([Buffer.from('{"id":1,\n')]), ProtocolError);
});
