/** Listening on a port a setting names, with a port in use reported as the setting to change. */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { TerminalError } from '../core/errors.js';

/** A port the process must listen on is taken. */
export class PortInUseError extends TerminalError {
  constructor(
    readonly port: number,
    readonly setting: string,
    options?: ErrorOptions,
  ) {
    super(
      'port_in_use',
      `port ${port} (${setting}) is already in use: stop what holds it or set ${setting} to a free port`,
      { port, setting },
      options,
    );
  }
}

/** Listens, resolving with the bound port; EADDRINUSE becomes a PortInUseError naming `setting`. */
export function listen(server: Server, port: number, host: string, setting: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      server.off('listening', onListening);
      reject(err.code === 'EADDRINUSE' ? new PortInUseError(port, setting, { cause: err }) : err);
    };
    const onListening = () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}
