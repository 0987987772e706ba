import { describe, expect, it } from 'vitest';
import { storeUnavailable } from '../../src/store/unavailable.js';
import { NotReplicatedError } from '../../src/store/replicated.js';
import { reconnectOnReadonly } from '../../src/store/connect.js';

const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });

describe('storeUnavailable: errors that mean "retry later" (503), not a bug (500)', () => {
  it.each([
    ['CLUSTERDOWN The cluster is down'],
    ["READONLY You can't write against a read only replica."],
    ['LOADING Redis is loading the dataset in memory'],
    ["MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."],
    ['TRYAGAIN Multiple keys request during rehashing of slot'],
    ['Too many Cluster redirections. Last error: Error: CLUSTERDOWN The cluster is down'],
    ['Connection is closed.'],
    ['All sentinels are unreachable. Retrying from scratch after 10ms.'],
    ['Command aborted due to connection close'],
    ['MOVED 13907 127.0.0.1:38419'],
  ])('%s', (message) => {
    expect(storeUnavailable(new Error(message))).toBe(true);
  });

  it('connection codes, a replication wait that fell short, a wrapped cause', () => {
    expect(storeUnavailable(withCode('connect ECONNREFUSED 127.0.0.1:6379', 'ECONNREFUSED'))).toBe(true);
    expect(storeUnavailable(new NotReplicatedError(0, 1, 1000))).toBe(true);
    expect(storeUnavailable(new Error('step failed', { cause: new Error('CLUSTERDOWN Hash slot not served') }))).toBe(
      true,
    );
  });

  it('a MULTI discarded (EXECABORT) when every command it refused was refused for unavailability', () => {
    const abort = (...refusals: string[]) =>
      Object.assign(new Error('EXECABORT Transaction discarded because of previous errors.'), {
        previousErrors: refusals.map((m) => new Error(m)),
      });
    expect(storeUnavailable(abort("READONLY You can't write against a read only replica."))).toBe(true);
    expect(storeUnavailable(abort('CLUSTERDOWN Hash slot not served', "ERR wrong number of arguments for 'get'"))).toBe(
      false,
    );
    expect(storeUnavailable(abort())).toBe(false);
  });

  it('anything else is not', () => {
    expect(storeUnavailable(new Error('ERR wrong number of arguments'))).toBe(false);
    expect(storeUnavailable(new TypeError('x is undefined'))).toBe(false);
    expect(storeUnavailable('CLUSTERDOWN')).toBe(false);
  });

  it('a demoted master (READONLY) makes the client reconnect and resend; other errors do not', () => {
    expect(reconnectOnReadonly(new Error("READONLY You can't write against a read only replica."))).toBe(2);
    expect(reconnectOnReadonly(new Error('ERR unknown command'))).toBe(false);
  });
});
