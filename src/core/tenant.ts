/**
 * A tenant's name: 1-63 letters, digits, _ or -, from a letter or digit. Never `*`: that is every tenant where a
 * setting or a token's claim names its tenants (`"tenants": "*"`), and the name of the search index every tenant's
 * runs are in (SEARCH_ANY_TENANT, src/runs/search.ts), so a list holding it would read every tenant's runs.
 */
import { z } from 'zod';

export const TENANT_NAME_FORMAT = /^[a-z0-9][a-z0-9_-]{0,62}$/i;

/** A tenant's name as a request or a setting gives it; `message` says what is wrong with another. */
export function tenantNameSchema(message = 'a tenant: 1-63 letters, digits, _ or - ("*" is every tenant, no name)') {
  return z.string().regex(TENANT_NAME_FORMAT, message);
}
