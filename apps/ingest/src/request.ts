import type { IncomingMessage } from 'node:http';
import { ApiError, bearerToken, clientAddress, parseStorableJson, validationError } from '@trackhouse/core';
import type { Context } from 'hono';
import type { z } from 'zod';
import type { RequestInfo } from './pipeline';

export const TRACK_BODY_LIMIT = 64 * 1024;
export const BATCH_BODY_LIMIT = 1024 * 1024;
/** rrweb batches carry DOM snapshots: a page's full snapshot fits, a runaway recorder does not. */
export const REPLAY_BODY_LIMIT = 2 * 1024 * 1024;
/** The longest user agent kept, from the body or the header (SPEC section 6). */
export const MAX_USER_AGENT = 512;

function payloadTooLarge(): ApiError {
  return new ApiError('PAYLOAD_TOO_LARGE', 'Payload too large');
}

/**
 * The raw body, at most `limit` bytes (413 beyond). Under @hono/node-server it is read straight
 * from the Node request: building a web Request and stream for every tracking call cost more
 * than the whole tracking pipeline.
 */
async function readBody(c: Context, limit: number): Promise<string> {
  const declared = c.req.header('content-length');
  if (declared !== undefined && Number(declared) > limit) throw payloadTooLarge();
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  if (!incoming) {
    const buffer = await c.req.arrayBuffer();
    if (buffer.byteLength > limit) throw payloadTooLarge();
    return Buffer.from(buffer).toString('utf8');
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        incoming.off('data', onData);
        incoming.resume(); // discard the rest
        reject(payloadTooLarge());
        return;
      }
      chunks.push(chunk);
    };
    incoming.on('data', onData);
    incoming.once('end', () => resolve(Buffer.concat(chunks, size).toString('utf8')));
    incoming.once('error', reject);
  });
}

/**
 * The body as JSON whatever its Content-Type (browser beacons send `text/plain`), every string
 * in it storable: bytes that are not UTF-8 were decoded to U+FFFD, and escapes of lone
 * surrogates or NUL become U+FFFD too (docs/decisions.md).
 */
export async function readJson(c: Context, limit: number): Promise<unknown> {
  const text = await readBody(c, limit);
  try {
    return parseStorableJson(text);
  } catch {
    throw new ApiError('INVALID_JSON', 'Request body is not valid JSON');
  }
}

export function parseWith<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw validationError('INVALID_PAYLOAD', 'Invalid payload', result.error.issues);
  return result.data;
}

export function requestInfo(c: Context, trustedProxyHops: number, bodyKey: string | undefined): RequestInfo {
  return {
    clientIp: clientAddress(c, trustedProxyHops),
    // The same bound as the body's user_agent: parsed agents are cached by this text.
    userAgent: c.req.header('user-agent')?.slice(0, MAX_USER_AGENT) ?? '',
    origin: c.req.header('origin'),
    referer: c.req.header('referer'),
    apiKey: bearerToken(c) ?? (bodyKey || undefined),
  };
}

/** A `:siteId` path parameter: a positive int4, else 400 INVALID_PARAMS. */
export function siteIdParam(c: Context): number {
  const raw = c.req.param('siteId') ?? '';
  if (!/^[1-9]\d{0,9}$/.test(raw) || Number(raw) > 2_147_483_647) {
    throw new ApiError('INVALID_PARAMS', 'siteId must be a positive integer', {
      fieldErrors: { siteId: ['must be a positive integer'] },
      formErrors: [],
    });
  }
  return Number(raw);
}
