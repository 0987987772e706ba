/**
 * A record's own value at `key`, or undefined. Settings keyed by a name someone chose (a tenant's, an agent's) are
 * plain objects, and `constructor` or `toString` is a valid name: indexing the object with it would find
 * Object.prototype's (a function) where the setting has no entry.
 */
export function ownValue<T>(record: Readonly<Record<string, T>>, key: string): T | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}
