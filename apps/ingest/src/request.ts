import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { getConnInfo } from '@hono/node-server/conninfo';
import { ApiError, bearerToken, validationError } from '@trackhouse/core';
import type { Context } from 'hono';
import type { z } from 'zod';
import type { RequestInfo } from './pipeline';

export const TRACK_BODY_LIMIT = 64 * 1024;
export const BATCH_BODY_LIMIT = 1024 * 1024;

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

/** The body as JSON whatever its Content-Type: browser beacons send `text/plain`. */
export async function readJson(c: Context, limit: number): Promise<unknown> {
  const text = await readBody(c, limit);
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

export function requestInfo(c: Context, trustProxy: boolean, bodyKey: string | undefined): RequestInfo {
  return {
    clientIp: clientAddress(c, trustProxy),
    userAgent: c.req.header('user-agent') ?? '',
    origin: c.req.header('origin'),
    referer: c.req.header('referer'),
    apiKey: bearerToken(c) ?? (bodyKey || undefined),
  };
}
