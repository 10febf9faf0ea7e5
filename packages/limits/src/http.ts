import { ApiError } from '@trackhouse/core';
import type { RateLimitResult } from './types';

/** The `RateLimit-*` headers of SPEC section 5, sent with every counted request. */
export function rateLimitHeaders(r: RateLimitResult): Record<string, string> {
  return {
    'RateLimit-Limit': String(r.limit),
    'RateLimit-Remaining': String(r.remaining),
    'RateLimit-Reset': String(r.resetSeconds),
  };
}

/** The 429 of SPEC section 5 for a spent budget: its message, `Retry-After` and the headers. */
export function rateLimited(r: RateLimitResult, message: string): ApiError {
  return new ApiError('RATE_LIMITED', message, undefined, {
    'Retry-After': String(r.resetSeconds),
    ...rateLimitHeaders(r),
  });
}
