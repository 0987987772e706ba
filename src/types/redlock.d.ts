// Minimal types for redlock 4.x (the package ships none).
declare module 'redlock' {
  interface RedlockOptions {
    driftFactor?: number;
    retryCount?: number;
    retryDelay?: number;
    retryJitter?: number;
  }
  export interface Lock {
    unlock(): Promise<void>;
    extend(ttl: number): Promise<Lock>;
    expiration: number;
  }
  export default class Redlock {
    constructor(clients: unknown[], options?: RedlockOptions);
    lock(resource: string, ttl: number): Promise<Lock>;
    on(event: 'clientError', listener: (err: Error) => void): this;
  }
}
