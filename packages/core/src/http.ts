import { isIP } from 'node:net';
import { getConnInfo } from '@hono/node-server/conninfo';
import type { Context, MiddlewareHandler } from 'hono';
import { Hono } from 'hono';
import { HTTPException } from 'hono/http-exception';
import { requestId } from 'hono/request-id';
import type { Logger } from 'pino';
import { Counter, Histogram, type Registry } from 'prom-client';
import { ApiError, type ErrorCode } from './errors';
import { uuidv7 } from './ids';

export interface HttpEnv {
  Variables: { requestId: string };
}

export interface HttpKitOptions {
  service: string;
  log: Logger;
  registry: Registry;
}

/** Answers an error in the one body shape of the spec; internal messages stay in the log. */
export function errorResponse(c: Context, err: unknown, log: Logger): Response {
  if (err instanceof ApiError) {
    if (err.headers) for (const [k, v] of Object.entries(err.headers)) c.header(k, v);
    return c.json(err.toBody(), err.status);
  }
  if (err instanceof HTTPException) {
    const code: ErrorCode =
      err.status === 413 ? 'PAYLOAD_TOO_LARGE' : err.status === 404 ? 'NOT_FOUND' : 'INVALID_PAYLOAD';
    const mapped = new ApiError(
      code,
      err.status === 413 ? 'Payload too large' : err.message || 'Bad request',
    );
    return c.json(mapped.toBody(), mapped.status);
  }
  log.error({ err, requestId: c.get('requestId') }, 'unhandled error');
  return c.json(new ApiError('INTERNAL_ERROR', 'Internal server error').toBody(), 500);
}

function httpMetrics(registry: Registry) {
  const requests =
    (registry.getSingleMetric('http_requests_total') as Counter<string> | undefined) ??
    new Counter({
      name: 'http_requests_total',
      help: 'HTTP requests by service, route and status',
      labelNames: ['service', 'method', 'route', 'status'],
      registers: [registry],
    });
  const duration =
    (registry.getSingleMetric('http_request_duration_seconds') as Histogram<string> | undefined) ??
    new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP request latency',
      labelNames: ['service', 'route'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    });
  return { requests, duration };
}

/**
 * A Hono app with the cross-cutting behaviour every trackhouse service shares:
 * X-Request-Id, one JSON log line per request, request metrics, and the spec's error shape
 * for thrown errors and unknown routes.
 */
export function createHttpApp({ service, log, registry }: HttpKitOptions): Hono<HttpEnv> {
  const app = new Hono<HttpEnv>();
  const { requests, duration } = httpMetrics(registry);

  app.use(requestId({ generator: () => uuidv7() }));
  app.use(accessLog(service, log, requests, duration));
  app.onError((err, c) => errorResponse(c, err, log));
  app.notFound((c) => c.json(new ApiError('NOT_FOUND', 'Not found').toBody(), 404));
  return app;
}

function accessLog(
  service: string,
  log: Logger,
  requests: Counter<string>,
  duration: Histogram<string>,
): MiddlewareHandler<HttpEnv> {
  // Label children are looked up once per (method, route, status), not hashed per request.
  const counters = new Map<string, Counter.Internal>();
  const timers = new Map<string, Histogram.Internal<string>>();
  return async (c, next) => {
    const started = performance.now();
    await next();
    const elapsed = performance.now() - started;
    const route = c.req.routePath || 'unmatched';
    const status = c.res.status;
    const method = c.req.method;
    const counterKey = `${method} ${route} ${status}`;
    let counter = counters.get(counterKey);
    if (!counter) {
      counter = requests.labels({ service, method, route, status: String(status) });
      counters.set(counterKey, counter);
    }
    counter.inc();
    let timer = timers.get(route);
    if (!timer) {
      timer = duration.labels({ service, route });
      timers.set(route, timer);
    }
    timer.observe(elapsed / 1000);
    if (log.isLevelEnabled('info')) {
      // The logger carries `service` in its bindings already; naming it again repeats the key.
      log.info({
        requestId: c.get('requestId'),
        method,
        path: c.req.path,
        status,
        durationMs: Math.round(elapsed * 100) / 100,
      });
    }
  };
}

/**
 * The client's address. With `trustedProxyHops` = 0 it is the socket's peer. Behind N proxies
 * that each append the address they received from (`X-Forwarded-For: client, proxy1, …`), the
 * client is the Nth entry from the right: entries further left were written by the client itself
 * and prove nothing. When that entry is missing or not an address, the leftmost valid one within
 * reach is taken, and failing that the peer.
 */
export function clientAddress(c: Context, trustedProxyHops: number): string {
  if (trustedProxyHops > 0) {
    const hops = c.req.header('x-forwarded-for')?.split(',') ?? [];
    for (let i = Math.max(0, hops.length - trustedProxyHops); i < hops.length; i++) {
      const candidate = hops[i]!.trim();
      if (isIP(candidate)) return candidate;
    }
  }
  try {
    return getConnInfo(c).remote.address ?? '';
  } catch {
    // Requests built in-process (tests) have no socket.
    return '';
  }
}

/** The token of an `Authorization: Bearer <token>` header, if the request has one. */
export function bearerToken(c: Context): string | undefined {
  const match = /^Bearer\s+(.+)$/i.exec(c.req.header('authorization')?.trim() ?? '');
  return match?.[1]?.trim() || undefined;
}

/** A dependency the readiness probe checks. */
export interface ReadinessCheck {
  name: string;
  check: () => Promise<void>;
}

/** Mounts GET /api/health (liveness), GET /api/ready (dependencies) and GET /metrics. */
export function mountOperationalRoutes(
  app: Hono<HttpEnv>,
  opts: { registry: Registry; checks: ReadinessCheck[]; timeoutMs?: number },
): void {
  app.get('/api/health', (c) => c.json({ status: 'ok' }));
  app.get('/api/ready', async (c) => {
    const results = await Promise.all(
      opts.checks.map(async ({ name, check }) => {
        try {
          await withTimeout(check(), opts.timeoutMs ?? 2000);
          return [name, 'ok'] as const;
        } catch {
          return [name, 'unavailable'] as const;
        }
      }),
    );
    const checks = Object.fromEntries(results);
    const failed = results.filter(([, s]) => s !== 'ok').map(([n]) => n);
    if (failed.length > 0) {
      throw new ApiError('NOT_READY', `Dependencies unavailable: ${failed.join(', ')}`, { checks });
    }
    return c.json({ status: 'ready', checks });
  });
  app.get('/metrics', async (c) => {
    c.header('Content-Type', opts.registry.contentType);
    return c.body(await opts.registry.metrics());
  });
}

async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
