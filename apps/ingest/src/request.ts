import { isIP } from 'node:net';
import { getConnInfo } from '@hono/node-server/conninfo';
import { ApiError, validationError } from '@trackhouse/core';
import type { Context } from 'hono';
import type { z } from 'zod';
import type { RequestInfo } from './pipeline';

export const TRACK_BODY_LIMIT = 64 * 1024;
export const BATCH_BODY_LIMIT = 1024 * 1024;

/**
 * The body as JSON whatever its Content-Type: browser beacons send `text/plain`. The byte limit
 * is enforced by the bodyLimit middleware before this runs.
 */
export async function readJson(c: Context): Promise<unknown> {
  const text = await c.req.text();
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError('INVALID_JSON', 'Request body is not valid JSON');
  }
}

export function parseWith<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw validationError('INVALID_PAYLOAD', 'Invalid payload', result.error.issues);
  return result.data;
}

function clientAddress(c: Context, trustProxy: boolean): string {
  if (trustProxy) {
    const forwarded = c.req.header('x-forwarded-for')?.split(',')[0]?.trim();
    if (forwarded && isIP(forwarded)) return forwarded;
  }
  try {
    return getConnInfo(c).remote.address ?? '';
  } catch {
    // Requests built in-process (tests) have no socket.
    return '';
  }
}

export function bearerKey(c: Context): string | undefined {
  const header = c.req.header('authorization');
  if (!header) return undefined;
  const match = /^Bearer\s+(.+)$/i.exec(header.trim());
  return match?.[1]?.trim() || undefined;
}

export function requestInfo(c: Context, trustProxy: boolean, bodyKey: string | undefined): RequestInfo {
  return {
    clientIp: clientAddress(c, trustProxy),
    userAgent: c.req.header('user-agent') ?? '',
    origin: c.req.header('origin'),
    referer: c.req.header('referer'),
    apiKey: bearerKey(c) ?? (bodyKey || undefined),
  };
}
