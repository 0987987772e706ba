/**
 * The routes an Express app mounts, `METHOD /path`, read from the app itself: the OpenAPI test compares them with
 * the document, the fuzzer sends requests to every one of them (so a new route is covered without a list to keep).
 */
import express from 'express';

interface Layer {
  route?: { path: string; methods: Record<string, boolean> };
  handle?: { stack?: Layer[] };
}

/** Every route of a router stack, `METHOD /path` (routers mounted without a path are walked). */
export function mountedRoutes(stack: Layer[]): string[] {
  return stack.flatMap((layer) => {
    if (layer.route) return Object.keys(layer.route.methods).map((m) => `${m.toUpperCase()} ${layer.route!.path}`);
    return layer.handle?.stack ? mountedRoutes(layer.handle.stack) : [];
  });
}

/**
 * The routes of every Express app `build` makes. An app mounted in another (the API in the full app) hides behind
 * a closure: each one is recorded as it is mounted. Apps mounted under a path (Bull Board) are not walked.
 */
export function routesOf(build: () => unknown): string[] {
  const apps: { router: { stack: Layer[] } }[] = [];
  const use = express.application.use;
  express.application.use = function (this: unknown, ...args: unknown[]) {
    for (const a of args) if (typeof a === 'function' && 'router' in a) apps.push(a as never);
    return (use as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof use;
  try {
    apps.push(build() as never);
  } finally {
    express.application.use = use;
  }
  return [...new Set(apps.flatMap((a) => mountedRoutes(a.router.stack)))];
}
