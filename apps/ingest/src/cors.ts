import type { MiddlewareHandler } from 'hono';

const ALLOW_HEADERS = 'Authorization, Content-Type, x-private-key';
const EXPOSE_HEADERS = 'Retry-After, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, X-Request-Id';

/**
 * Tracking CORS: any origin, echoed with credentials allowed (browser beacons carry credentials,
 * and a `*` answer makes browsers drop them). Headers go through `c.header` so they land on
 * whatever response follows, errors included, without building an intermediate Response.
 */
export const trackingCors: MiddlewareHandler = async (c, next) => {
  const origin = c.req.header('origin');
  if (origin) {
    c.header('Access-Control-Allow-Origin', origin);
    c.header('Access-Control-Allow-Credentials', 'true');
    c.header('Vary', 'Origin');
  } else {
    c.header('Access-Control-Allow-Origin', '*');
  }
  if (c.req.method === 'OPTIONS') {
    c.header('Access-Control-Allow-Methods', 'GET, POST, OPTIONS');
    c.header('Access-Control-Allow-Headers', ALLOW_HEADERS);
    c.header('Access-Control-Max-Age', '86400');
    return c.body(null, 204);
  }
  c.header('Access-Control-Expose-Headers', EXPOSE_HEADERS);
  await next();
};
