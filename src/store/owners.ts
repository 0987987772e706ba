/**
 * Who holds a lock or an admission: a Redis connection, named so that the name survives neither a restart of
 * the server nor a failover.
 *
 * The liveness the engine recovers by (src/worker/ownerWatch.ts, src/flow/admission.ts) asks the server whether
 * the connection that holds a job still exists (`CLIENT LIST ID`). A client id alone is unique only while one
 * server process runs: a restarted Redis, or a replica promoted in a failover, numbers its connections anew, so a
 * lock written before that names an id some new connection may now have, and a dead owner would be taken for
 * alive until its lock expired. An owner is therefore `<clientId>-<server>`, where `<server>` is the start of the
 * server process's `run_id` (random at every start, different on every node): an owner that names another server
 * cannot be connected to this one, so it is gone.
 *
 * An owner of the older form (`<clientId>` alone, written by a process that predates the server part) is checked
 * by its id, as before.
 */
import type { Redis } from 'ioredis';

/** How much of the server's run_id an owner carries: 48 bits, enough to tell the server processes of a fleet apart. */
const SERVER_TAG_LENGTH = 12;

/** The start of `run_id` in an `INFO server` reply. */
export function serverTagOfInfo(info: string): string {
  const runId = /(?:^|\n)run_id:([0-9a-f]+)/.exec(info)?.[1];
  if (!runId) throw new Error('INFO server named no run_id');
  return runId.slice(0, SERVER_TAG_LENGTH);
}

/** An owner's parts: its client id and, in the current form, the server it was connected to. */
export function parseOwner(owner: string): { clientId: string; server?: string } | undefined {
  const m = /^(\d+)(?:-([0-9a-f]+))?$/.exec(owner);
  if (!m) return undefined;
  return m[2] ? { clientId: m[1]!, server: m[2] } : { clientId: m[1]! };
}

/** Client ids in a `CLIENT LIST` reply (one `id=<n> addr=...` line per client). */
export function clientIdsOfList(reply: string): Set<string> {
  return new Set([...reply.matchAll(/(?:^|\n)id=(\d+) /g)].map((m) => m[1]!));
}

/**
 * Each connection's server, read once per connection: a reconnection (the `ready` event, also after a failover or a
 * restart) forgets it, so the next read asks the server again. Without the cache every owner-watch tick sent `INFO`.
 */
const servers = new WeakMap<Redis, string>();
const watched = new WeakSet<Redis>();

async function serverOf(node: Redis): Promise<string> {
  if (!watched.has(node)) {
    watched.add(node);
    node.on('ready', () => servers.delete(node));
  }
  let server = servers.get(node);
  if (server === undefined) {
    server = serverTagOfInfo(String(await node.info('server')));
    servers.set(node, server);
  }
  return server;
}

/**
 * Each connection's owner, kept while its socket is the one it was read on: a server's client id lasts as long as
 * the TCP connection, and ioredis opens a new socket at every reconnection. Without it every owner-watch pass sent
 * `CLIENT ID` for an answer that had not changed.
 */
const owners = new WeakMap<Redis, { socket: unknown; owner: string }>();

/** The owner name of `node`'s connection: its CLIENT ID and its server. */
export async function ownerOfConnection(node: Redis): Promise<string> {
  const server = await serverOf(node);
  const socket = node.stream;
  const kept = owners.get(node);
  if (kept !== undefined && node.status === 'ready' && kept.socket === socket) return kept.owner;
  const owner = `${String(await node.client('ID'))}-${server}`;
  // Kept only when the socket asked is still the connection's: a reconnection meanwhile may have answered for either.
  if (node.stream === socket && node.status === 'ready') owners.set(node, { socket, owner });
  return owner;
}

/**
 * The owners among `owners` that are connected to `node`'s server now. The server is the one this connection was
 * found on since its last (re)connection; a reconnection between that and the client list makes at most one check
 * take an owner of the old server for alive, and the next one (the server read again) finds it gone.
 */
export async function liveOwners(node: Redis, owners: readonly string[]): Promise<Set<string>> {
  const parsed = owners.map((o) => [o, parseOwner(o)] as const);
  const ids = [...new Set(parsed.flatMap(([, p]) => (p ? [p.clientId] : [])))];
  if (ids.length === 0) return new Set();
  const server = await serverOf(node);
  const connected = clientIdsOfList(String(await node.client('LIST', 'ID', ...ids)));
  const alive = new Set<string>();
  for (const [owner, p] of parsed) {
    if (p && connected.has(p.clientId) && (p.server === undefined || p.server === server)) alive.add(owner);
  }
  return alive;
}
