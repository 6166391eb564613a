import * as path from 'node:path';

/**
 * The daemon's socket, by the CLI's own rule: `GENWARD_SOCKET`; else `genward.sock` in
 * `GENWARD_STATE_DIR`; else in the default state directory (`/run/genward` as root,
 * `$XDG_RUNTIME_DIR/genward` otherwise). Throws when no default exists.
 */
export function defaultSocketPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.GENWARD_SOCKET) return env.GENWARD_SOCKET;
  if (env.GENWARD_STATE_DIR) return path.join(env.GENWARD_STATE_DIR, 'genward.sock');
  if (typeof process.geteuid === 'function' && process.geteuid() === 0) {
    return '/run/genward/genward.sock';
  }
  if (env.XDG_RUNTIME_DIR) return path.join(env.XDG_RUNTIME_DIR, 'genward', 'genward.sock');
  throw new Error(
    'no default daemon socket: XDG_RUNTIME_DIR is unset; pass { socket } or set GENWARD_SOCKET',
  );
}
