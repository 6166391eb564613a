/**
 * The client side of genward's framing: JSON lines, and output frames (a JSON header
 * announcing `len`, exactly `len` raw bytes, then `\n`).
 */
import { ProtocolError } from './errors.js';

/** Longest JSON line the daemon sends (1 MiB, without its newline). */
export const MAX_LINE = 1 << 20;

/** One decoded message: a response, an event, or an output frame with its bytes. */
export type Message =
  | { kind: 'response'; body: Record<string, any> }
  | { kind: 'event'; body: Record<string, any> }
  | { kind: 'output'; header: Record<string, any>; data: Buffer };

/** Reassembles messages from arbitrary chunks of the socket's byte stream. */
export class FrameDecoder {
  private parts: Buffer[] = [];
  private partsLen = 0;
  /** Reading an output frame's payload: its header and the bytes still due (with `\n`). */
  private header: Record<string, any> | null = null;
  private need = 0;

  /** Feeds one chunk; calls `emit` for every message it completes. Throws ProtocolError. */
  push(chunk: Buffer, emit: (m: Message) => void): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.header) {
        const take = Math.min(this.need - this.partsLen, chunk.length - i);
        this.parts.push(chunk.subarray(i, i + take));
        this.partsLen += take;
        i += take;
        if (this.partsLen < this.need) break;
        const whole = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.partsLen);
        this.parts = [];
        this.partsLen = 0;
        if (whole[whole.length - 1] !== 0x0a) {
          throw new ProtocolError('output frame not followed by a newline: the stream is out of step');
        }
        const header = this.header;
        this.header = null;
        emit({ kind: 'output', header, data: whole.subarray(0, whole.length - 1) });
        continue;
      }
      const nl = chunk.indexOf(0x0a, i);
      if (nl < 0) {
        this.parts.push(chunk.subarray(i));
        this.partsLen += chunk.length - i;
        if (this.partsLen > MAX_LINE + 2) throw new ProtocolError('a line from the daemon is longer than 1 MiB');
        break;
      }
      let line: Buffer;
      if (this.parts.length === 0) {
        line = chunk.subarray(i, nl);
      } else {
        this.parts.push(chunk.subarray(i, nl));
        line = Buffer.concat(this.parts);
        this.parts = [];
        this.partsLen = 0;
      }
      i = nl + 1;
      if (line.length === 0 || (line.length === 1 && line[0] === 0x0d)) continue;
      let body: unknown;
      try {
        body = JSON.parse(line.toString('utf8'));
      } catch (e) {
        throw new ProtocolError(`invalid JSON from the daemon: ${(e as Error).message}`);
      }
      if (typeof body !== 'object' || body === null || Array.isArray(body)) {
        throw new ProtocolError('a line from the daemon is not a JSON object');
      }
      const obj = body as Record<string, any>;
      if (obj.event === 'output') {
        const len = obj.len;
        if (!Number.isInteger(len) || len < 0 || len > MAX_LINE) {
          throw new ProtocolError(`output frame with a bad len: ${String(len)}`);
        }
        this.header = obj;
        this.need = len + 1;
      } else if ('event' in obj) {
        emit({ kind: 'event', body: obj });
      } else if ('ok' in obj) {
        emit({ kind: 'response', body: obj });
      }
      // Anything else is ignored: clients must ignore what they do not know.
    }
  }
}
