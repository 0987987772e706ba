/** The API with every layer mounted (operators, Bull Board, webhooks). */
import type { AppContext } from '../app/context.js';
import { createApi } from './api.js';

export function createFullApi(ctx: AppContext, isReady: () => boolean) {
  return createApi(ctx, { isReady });
}
