export { Client, PROTOCOL_VERSION, REQUIRED_CAPABILITIES, type ConnectOptions } from './client.js';
export { SessionHandle } from './handle.js';
export { defaultSocketPath } from './socket.js';
export { FrameDecoder, MAX_LINE, type Message } from './frame.js';
export {
  GenwardError,
  StaleGenerationError,
  SpawnFailedError,
  NoSuchSessionError,
  NotRunningError,
  BusyError,
  InputClosedError,
  PermissionDeniedError,
  LimitError,
  NoConfigError,
  BadConfigError,
  ConnectionLostError,
  NoDaemonError,
  ProtocolError,
  ReadinessError,
  type SpawnFailure,
} from './errors.js';
export type * from './types.js';
