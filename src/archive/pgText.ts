/**
 * The archive's text as PostgreSQL can hold it. PostgreSQL's text and jsonb refuse the NUL character (U+0000), which
 * a customer's text may carry (the intake takes any JSON string). Every string the archive stores (text columns,
 * and every string and object key inside a jsonb column) is written escaped, and read back unescaped, so what the
 * API and the console read from the archive is what Redis served:
 *
 *   U+0000 -> U+FFFF '0'      U+FFFF -> U+FFFF U+FFFF
 *
 * U+FFFF is a Unicode noncharacter (kept for a program's own use, never assigned): text without NUL or U+FFFF, the
 * whole of it in practice, is stored as it is, so the archive's SQL (containment on search_fields, `->>` on record
 * and budget) and a person reading a row see it unchanged. A query's values go through the same escape
 * (archiveText) to match stored ones. On read, U+FFFF followed by anything else is left as it is.
 */

const ESC = '\uffff';
const ESCAPED = /\uffff([0\uffff])/g;

/** A string as the archive stores it (a text column, a value compared with one). */
export function archiveText(s: string): string {
  // U+FFFF doubled first, then U+0000 (whose escape holds one U+FFFF).
  return s.includes('\u0000') || s.includes(ESC) ? s.replaceAll(ESC, ESC + ESC).replaceAll('\u0000', ESC + '0') : s;
}

/** A string as the archive stored it, unescaped. */
export function fromArchiveText(s: string): string {
  return s.includes(ESC) ? s.replace(ESCAPED, (_m, c: string) => (c === '0' ? '\u0000' : ESC)) : s;
}

/** `value` with every string and object key mapped by `f` (arrays and objects copied, anything else as it is). */
function mapStrings(value: unknown, f: (s: string) => string): unknown {
  if (typeof value === 'string') return f(value);
  if (Array.isArray(value)) return value.map((v) => mapStrings(v, f));
  if (value !== null && typeof value === 'object') {
    // fromEntries, not assignment: a key named __proto__ stays an own key.
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [f(k), mapStrings(v, f)]));
  }
  return value;
}

/** A jsonb parameter: `value`'s JSON with every string and key escaped (JSON.stringify's text when none needs it). */
export function archiveJson(value: unknown): string {
  const json = JSON.stringify(value);
  // JSON.stringify writes NUL as the escape \u0000: a text without it and without U+FFFF needs no walk.
  return json.includes('\\u0000') || json.includes(ESC) ? JSON.stringify(mapStrings(value, archiveText)) : json;
}

/** A jsonb value as read (pg parses it): every string and key unescaped. */
export function fromArchiveJson<T>(value: T): T {
  return mapStrings(value, fromArchiveText) as T;
}
