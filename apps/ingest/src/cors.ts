import { ApiError } from '@trackhouse/core';
import type { Context } from 'hono';
import { cors } from 'hono/cors';

/**
 * Tracking CORS: any origin, echoed with credentials allowed (browser beacons carry credentials,
 * and a `*` answer makes browsers drop them).
 */
export const trackingCors = cors({
  origin: (origin) => origin || '*',
  credentials: true,
  allowMethods: ['GET', 'POST', 'OPTIONS'],
  allowHeaders: ['Authorization', 'Content-Type', 'x-private-key'],
  exposeHeaders: ['Retry-After', 'RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'X-Request-Id'],
  maxAge: 86_400,
});

export function tooLarge(c: Context): Response {
  const err = new ApiError('PAYLOAD_TOO_LARGE', 'Payload too large');
  return c.json(err.toBody(), err.status);
}
