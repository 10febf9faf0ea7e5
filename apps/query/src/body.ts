import { ApiError, type HttpEnv, parseStorableJson } from '@trackhouse/core';
import type { MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';

/**
 * The largest request body the query service reads. Its bodies are small management objects
 * (a site configuration with 100 excluded ranges is about 5 KiB); anything larger is refused
 * before it is buffered, validated or authenticated.
 */
export const MAX_BODY_BYTES = 64 * 1024;

/** 413 past MAX_BODY_BYTES: by Content-Length at once, or while a chunked body streams in. */
export const limitBody: MiddlewareHandler<HttpEnv> = bodyLimit({
  maxSize: MAX_BODY_BYTES,
  onError: () => {
    throw new ApiError('PAYLOAD_TOO_LARGE', `Request body larger than ${MAX_BODY_BYTES / 1024} KiB`);
  },
});

// The media types the JSON validators read (`application/json`, `application/x+json`).
const JSON_TYPE = /^application\/([\w.-]+\+)?json$/i;
const mediaType = (header: string | undefined) => header?.split(';')[0]?.trim() ?? '';

/**
 * JSON bodies as the validators will read them: every string and key made storable (lone
 * surrogates and NUL become U+FFFD, docs/decisions.md), so that no route can hand Postgres a
 * string it refuses. Runs after `limitBody`: the text is small. Malformed JSON is left for the
 * validator to refuse.
 */
export const storableJsonBody: MiddlewareHandler<HttpEnv> = async (c, next) => {
  if (c.req.raw.body && JSON_TYPE.test(mediaType(c.req.header('content-type')))) {
    const text = await c.req.text();
    let value: unknown;
    try {
      value = parseStorableJson(text);
    } catch {
      // Not JSON: the validator reads the text again and answers 400.
      return next();
    }
    // The validators read the body with `c.req.json()`: they get the storable value. (Writing
    // it back as text instead would turn numbers JSON cannot print, like 1e400, into null.)
    c.req.json = <T>() => Promise.resolve(value as T);
  }
  await next();
};
