/**
 * Deterministic data for the read tools: knowledge-base articles derived
 * from the query and customer profiles derived from the email, so a replayed
 * read returns the same answer without any stored state.
 */

/** FNV-1a 32-bit: stable across runs and processes. */
export function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

export interface KbArticle {
  id: string;
  title: string;
  snippet: string;
  score: number;
}

const TOPICS = [
  'Requesting a refund',
  'Resetting your password',
  'Changing your billing plan',
  'Tracking a delayed order',
  'Updating your shipping address',
  'Cancelling a subscription',
  'Understanding invoice charges',
  'Contacting support by email',
] as const;

/** Three articles, best first; the same query (trimmed, case-folded) gives the same list. */
export function kbSearch(query: string): { query: string; articles: KbArticle[] } {
  const q = query.trim().toLowerCase();
  const h = fnv1a(q);
  const articles = [0, 1, 2].map((i) => {
    const topic = (h + i * 3) % TOPICS.length;
    return {
      id: `kb_${String(topic + 1).padStart(3, '0')}`,
      title: TOPICS[topic]!,
      snippet: `${TOPICS[topic]!}: steps that apply to "${q}".`,
      score: Number((0.9 - i * 0.2 - ((h >>> (8 * i)) & 0xff) / 2560).toFixed(3)),
    };
  });
  return { query: q, articles };
}

export interface CustomerProfile {
  id: string;
  email: string;
  name: string;
  plan: 'free' | 'pro' | 'enterprise';
  customer_since: string;
  open_tickets: number;
  lifetime_value_cents: number;
  refund_eligible: boolean;
}

const PLANS = ['free', 'pro', 'enterprise'] as const;
const EPOCH_MS = Date.UTC(2019, 0, 1);
const DAY_MS = 86_400_000;

/** The profile of `email`, or undefined for a local part starting with "unknown" (the not-found path). */
export function customerProfile(email: string): CustomerProfile | undefined {
  const e = email.trim().toLowerCase();
  const local = e.split('@')[0] ?? '';
  if (local.startsWith('unknown')) return undefined;
  const h = fnv1a(e);
  const name = local
    .split(/[._-]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join(' ');
  return {
    id: `cus_${h.toString(16).padStart(8, '0')}`,
    email: e,
    name: name || 'Customer',
    plan: PLANS[h % PLANS.length]!,
    customer_since: new Date(EPOCH_MS + (h % 2000) * DAY_MS).toISOString().slice(0, 10),
    open_tickets: (h >>> 4) % 4,
    lifetime_value_cents: ((h >>> 8) % 500_000) + 1_000,
    refund_eligible: (h >>> 3) % 5 !== 0,
  };
}
