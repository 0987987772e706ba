import { z } from 'zod';
import { dispatchCreate, lookupByKey } from './sandboxResource.js';
import type { ServiceOptions } from '../../../core/http.js';
import type { WriteTool } from '../../../core/tool.js';

const args = z
  .object({
    orderId: z.string().min(1),
    amountCents: z.number().int().positive(),
    currency: z.string().length(3),
    reason: z.string().min(1).max(500),
  })
  .strict();

export type RefundArgs = z.infer<typeof args>;

export const refundTool = (service: ServiceOptions): WriteTool<RefundArgs> => ({
  name: 'refund',
  description: 'Refund an order.',
  effect: 'write',
  args,
  timeoutMs: 5000,
  service: { enforcesKey: true, lookup: 'key' },
  // One refund per order, amount and currency: `eur` and `EUR` are one currency (ISO 4217 codes are
  // upper case); order ids keep their case (a service may tell them apart), spacing is dropped.
  identity: (a) => ({ orderId: a.orderId.trim(), amountCents: a.amountCents, currency: a.currency.trim().toUpperCase() }),
  dispatch: (a, _ctx, req) => dispatchCreate(service, 'refunds', a, req),
  lookup: (_ctx, req) => lookupByKey(service, 'refunds', req),
});
