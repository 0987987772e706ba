/** Owner names (src/store/owners.ts) and the lock tokens that carry them (src/store/bullmqInternals.ts). */
import { describe, expect, it } from 'vitest';
import { clientIdsOfList, parseOwner, serverTagOfInfo } from '../../src/store/owners.js';
import { ownerBaseOfToken, ownerOfToken } from '../../src/store/bullmqInternals.js';

describe('owner names', () => {
  it('name the client id and the start of the server process run_id', () => {
    const info =
      '# Server\r\nredis_version:7.0.15\r\nrun_id:9f3c2a1b4d5e6f708192a3b4c5d6e7f8091a2b3c\r\ntcp_port:6379\r\n';
    expect(serverTagOfInfo(info)).toBe('9f3c2a1b4d5e');
    expect(() => serverTagOfInfo('# Server\r\n')).toThrow(/run_id/);
    expect(parseOwner('42-9f3c2a1b4d5e')).toEqual({ clientId: '42', server: '9f3c2a1b4d5e' });
    expect(parseOwner('42')).toEqual({ clientId: '42' });
    expect(parseOwner('x-1')).toBeUndefined();
  });

  it('are read back from lock tokens of either form, and from CLIENT LIST', () => {
    expect(ownerOfToken('8c1d-uuid@42-9f3c2a1b4d5e:17')).toBe('42-9f3c2a1b4d5e');
    expect(ownerOfToken('8c1d-uuid@42:17')).toBe('42');
    expect(ownerOfToken('another-token:3')).toBeUndefined();
    expect(ownerBaseOfToken('8c1d-uuid@42-9f3c2a1b4d5e:17')).toBe('8c1d-uuid');
    expect(clientIdsOfList('id=7 addr=127.0.0.1:1 laddr=x\nid=12 addr=127.0.0.1:2 laddr=x\n')).toEqual(
      new Set(['7', '12']),
    );
  });
});
