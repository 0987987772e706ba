import { describe, expect, it } from 'vitest';
import { parseMonitorLine, unrepr } from '../../bench/lib/monitorTrace.js';
import { scriptBodies, splitRounds } from '../../bench/lib/replayTrace.js';
import { COMMIT_ABLATIONS, ablatedCommit, commitScript } from '../../bench/lib/commitAblations.js';

const cmd = (...args: string[]) => ({ client: '127.0.0.1:1', args: args.map((a) => Buffer.from(a, 'latin1')) });

describe('MONITOR lines back to the bytes sent', () => {
  it('undoes every escape sdscatrepr writes', () => {
    expect(unrepr('a\\"b\\\\c\\n\\r\\t\\a\\b')).toEqual(Buffer.from('a"b\\c\n\r\t\x07\x08', 'latin1'));
    expect(unrepr('\\x00\\xff\\xc3\\xa9')).toEqual(Buffer.from([0, 0xff, 0xc3, 0xa9]));
  });

  it('splits a line into client and exact arguments, a JSON argument included', () => {
    const line = '1764870000.123456 [0 127.0.0.1:53422] "EVALSHA" "ab12" "1" "{\\"a\\":\\"x\\\\\\"y\\"}" ""';
    const c = parseMonitorLine(line);
    expect(c?.client).toBe('127.0.0.1:53422');
    expect(c?.args.map((a) => a.toString())).toEqual(['EVALSHA', 'ab12', '1', '{"a":"x\\"y"}', '']);
    expect(JSON.parse(c!.args[3]!.toString())).toEqual({ a: 'x"y' });
  });

  it("leaves out a script's own calls", () => {
    expect(parseMonitorLine('1764870000.1 [0 lua] "GET" "k"')).toBeUndefined();
  });

  it('refuses an escape it does not know rather than guess', () => {
    expect(() => unrepr('\\q')).toThrow(/unknown escape/);
  });
});

describe('a trace into rounds', () => {
  const snap = ['INFO', 'commandstats', 'stats', 'cpu', 'persistence'];
  it('measures each round between its two INFO snapshots, from its FLUSHALL', () => {
    const trace = [
      cmd('HSET', 'before', 'f', 'v'),
      cmd('FLUSHALL'),
      cmd('SET', 'a', '1'),
      cmd(...snap),
      cmd('EVAL', 'return 1', '0'),
      cmd(...snap),
      cmd('GET', 'a'),
      cmd('FLUSHALL'),
      cmd(...snap),
      cmd('SET', 'b', '2'),
      cmd(...snap),
    ];
    const rounds = splitRounds(trace);
    expect(rounds).toHaveLength(2);
    expect(rounds[0]!.prefix.map((c) => c.args[0]!.toString())).toEqual(['FLUSHALL', 'SET']);
    expect(rounds[0]!.window.map((c) => c.args[0]!.toString())).toEqual(['EVAL']);
    expect(rounds[1]!.window.map((c) => c.args[1]!.toString())).toEqual(['b']);
    expect([...scriptBodies(trace).values()].map(String)).toEqual(['return 1']);
  });

  it('refuses a round without its two snapshots', () => {
    expect(() => splitRounds([cmd('FLUSHALL'), cmd(...snap), cmd('SET', 'a', '1')])).toThrow(/1 INFO snapshots/);
  });
});

describe('commit ablations', () => {
  it.each(Object.keys(COMMIT_ABLATIONS))('%s removes exactly its write from the shipped commit', (name) => {
    const shipped = commitScript();
    const ablated = ablatedCommit(name);
    expect(ablated).not.toContain(COMMIT_ABLATIONS[name]!.removes);
    expect(shipped.length - ablated.length).toBe(
      COMMIT_ABLATIONS[name]!.removes.length - COMMIT_ABLATIONS[name]!.keeps.length,
    );
  });
});

describe('commit ablations joined', () => {
  it('removes several writes at once, and names an unknown one', () => {
    const both = ablatedCommit('journal+events');
    expect(both).not.toContain(COMMIT_ABLATIONS.journal!.removes);
    expect(both).not.toContain(COMMIT_ABLATIONS.events!.removes);
    expect(() => ablatedCommit('events+nope')).toThrow(/unknown ablation nope/);
  });
});
