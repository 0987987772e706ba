/**
 * The tool calls of one model answer, each with an id of its own. Everything a call starts is named by its step and
 * its id (its ledger action, the child run an agent tool starts, the observation the model is answered with), so two
 * calls of one answer that share an id would be one call: the second write answered by the first's action, never
 * sent. The vendors' own APIs give distinct ids; an OpenAI-compatible server or a provider of one's own may repeat one,
 * or give none. A repeated or empty id is replaced by one made from the call's place in the answer (`<id>~<n>`, n from
 * 1, with more `~` while that is another call's id).
 *
 * `idOf` names an item's call id, or undefined for an item that is no call (an answer's text beside its calls).
 * Returns `items` itself when every call's id is distinct and non-empty (the usual answer: nothing allocated).
 */
export function distinctCallIds<T>(
  items: T[],
  idOf: (item: T) => string | undefined,
  withId: (item: T, id: string) => T,
): T[] {
  // An answer has a handful of calls: compared pairwise, nothing is allocated for the usual answer.
  for (let i = 0; i < items.length; i++) {
    const id = idOf(items[i]!);
    if (id === undefined) continue;
    if (id === '') return madeDistinct(items, idOf, withId);
    for (let j = 0; j < i; j++) if (idOf(items[j]!) === id) return madeDistinct(items, idOf, withId);
  }
  return items;
}

function madeDistinct<T>(items: T[], idOf: (item: T) => string | undefined, withId: (item: T, id: string) => T): T[] {
  const given = new Set(items.map(idOf));
  const taken = new Set<string>();
  return items.map((item, i) => {
    const id = idOf(item);
    if (id === undefined) return item;
    if (id !== '' && !taken.has(id)) {
      taken.add(id);
      return item;
    }
    let fresh = `${id || 'call'}~${i + 1}`;
    while (given.has(fresh) || taken.has(fresh)) fresh += '~';
    taken.add(fresh);
    return withId(item, fresh);
  });
}
