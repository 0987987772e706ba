/**
 * An action's ledger history as stored: the moves appended to its list (`KeySpace.actionHistory`) by the ledger's
 * scripts, and, once the run has ended, the moves folded into the record's `history` field (foldHistory-3.lua, by
 * src/runs/compact.ts), packed. A move made after the fold (an operator's compensation of an ended run) goes to the
 * list again: the history is the folded moves, then the list's. Every reader goes through readHistory.
 */
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { RedisClient } from './connect.js';
import { actionHistory } from './calls/actionHistory.js';
import { InvariantError } from '../core/errors.js';

/** The record field holding the folded moves. */
export const FOLDED_HISTORY_FIELD = 'history';

/** The folded form's first character: the rest is base64 of the moves' JSON array, raw deflate with the dictionary. */
const MARKER = '~';
/** How the ledger's moves open (src/ledger/ledger.ts writes them; nothing an agent names). */
const DICTIONARY = Buffer.from(
  '[{"from":null,"to":"planned","at":1,"by":"worker:","why":"tool call requested by the model","evidence":{"step":1,"callId":"call_1_0"}},' +
    '{"from":"planned","to":"authorized","at":1,"by":"worker:","why":"no approval required by policy"},' +
    '{"from":"authorized","to":"dispatched","at":1,"by":"worker:","why":"dispatching","evidence":{"attempt":1}},' +
    '{"from":"dispatched","to":"confirmed","at":1,"by":"worker:","why":"service confirmed","evidence":{"receipt":"","replayed":false}}]',
  'utf8',
);

/** The folded form of moves given as their JSON (each as the list holds it), oldest first. */
export function foldMoves(moves: readonly string[]): string {
  const json = `[${moves.join(',')}]`;
  return (
    MARKER + deflateRawSync(json, { level: 6, windowBits: 12, memLevel: 4, dictionary: DICTIONARY }).toString('base64')
  );
}

/** The moves (JSON each) a folded field holds, oldest first. */
export function unfoldMoves(folded: string | null | undefined): string[] {
  if (!folded) return [];
  try {
    const json = folded.startsWith(MARKER)
      ? inflateRawSync(Buffer.from(folded.slice(1), 'base64'), { windowBits: 15, dictionary: DICTIONARY }).toString()
      : folded;
    return (JSON.parse(json) as unknown[]).map((m) => JSON.stringify(m));
  } catch (err) {
    throw new InvariantError(
      'invariant',
      'ledger_history_unreadable: a folded history does not unpack',
      {},
      { cause: err },
    );
  }
}

/**
 * Every move of an action (JSON each), oldest first: the folded ones, then the list's. Both read in one script
 * (actionHistory-2.lua): a fold (foldHistory's script) between two reads would show neither the folded moves nor the
 * list it emptied.
 */
export async function readHistory(redis: RedisClient, actionKey: string, historyKey: string): Promise<string[]> {
  const { folded, listed } = await actionHistory(redis, actionKey, historyKey, FOLDED_HISTORY_FIELD);
  return [...unfoldMoves(folded), ...listed];
}
