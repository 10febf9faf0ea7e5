import { createRoute, z } from '@hono/zod-openapi';
import { ApiError, storable } from '@trackhouse/core';
import type { RateLimitResult } from '@trackhouse/limits';
import { type ApiKeyRecord, createApiKeyWithin, listApiKeys, revokeApiKey } from '@trackhouse/postgres';
import type { Caller } from '../auth';
import { type QueryContext, router } from '../context';
import { errorSchema, errors, json } from '../schemas';

const keySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    prefix: z.string(),
    createdAt: z.string(),
    expiresAt: z.string().nullable(),
    lastUsedAt: z.string().nullable(),
    revoked: z.boolean(),
  })
  .openapi('ApiKey');

const toKey = (k: ApiKeyRecord) => ({
  id: k.id,
  name: k.name,
  prefix: k.prefix,
  createdAt: k.createdAt.toISOString(),
  expiresAt: k.expiresAt?.toISOString() ?? null,
  lastUsedAt: k.lastUsedAt?.toISOString() ?? null,
  revoked: k.revokedAt !== null,
});

const DAY_MS = 86_400_000;

/**
 * The expiry of a new key: what was asked, but never later than the key creating it, which is
 * also the default when nothing was asked (docs/decisions.md).
 */
function expiryFor(caller: Caller, expiresInDays: number | undefined, now: number): Date | null {
  const asked = expiresInDays === undefined ? null : new Date(now + expiresInDays * DAY_MS);
  const limit = caller.keyExpiresAt;
  if (!limit) return asked;
  if (!asked) return limit;
  if (asked > limit) {
    throw new ApiError('INVALID_PAYLOAD', 'Invalid payload', {
      fieldErrors: {
        expiresInDays: [`a key may not outlive the key that creates it (${limit.toISOString()})`],
      },
      formErrors: [],
    });
  }
  return asked;
}

export function apiKeyRoutes(ctx: QueryContext) {
  const app = router();
  const { API_KEYS_PER_USER_MAX: maxActive, API_KEY_CREATE_LIMIT_PER_DAY: perDay } = ctx.settings;
  const creations = ctx.stores.rateLimiter('api-key-create', perDay, DAY_MS);

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/user/api-keys',
      summary: "Create an API key for the caller's user; the key is shown once",
      description:
        'At most API_KEYS_PER_USER_MAX active keys per user (409 TOO_MANY_API_KEYS) and API_KEY_CREATE_LIMIT_PER_DAY creations per user in any 24 hours (429 RATE_LIMITED with Retry-After).',
      request: {
        body: {
          content: {
            'application/json': {
              schema: z.strictObject({
                name: z.string().trim().min(1).max(200),
                expiresInDays: z.number().int().min(1).max(3650).optional().openapi({
                  description:
                    "Days until the key expires. A key that expires creates keys expiring no later than itself (the default when omitted); one that doesn't creates keys without expiry by default.",
                }),
              }),
            },
          },
          required: true,
        },
      },
      responses: {
        201: json(
          z.object({
            id: z.string(),
            name: z.string(),
            key: z.string(),
            createdAt: z.string(),
            expiresAt: z.string().nullable(),
          }),
          'The new key',
        ),
        409: json(errorSchema, 'Too many active keys'),
        ...errors,
      },
    }),
    async (c) => {
      const caller = await ctx.auth.requireCaller(c);
      const { name, expiresInDays } = c.req.valid('json');
      const now = Date.now();
      const expiresAt = expiryFor(caller, expiresInDays, now);
      let budget: RateLimitResult | undefined;
      const created = await createApiKeyWithin(
        ctx.sql,
        { userId: caller.userId, name, expiresAt },
        {
          maxActive,
          admit: async () => {
            budget = await creations.hit(caller.userId, now);
            return budget.allowed;
          },
        },
      );
      if (created === 'too_many_active') {
        throw new ApiError(
          'TOO_MANY_API_KEYS',
          `At most ${maxActive} active API keys per user: revoke one first`,
        );
      }
      if (created === 'not_admitted') {
        throw new ApiError(
          'RATE_LIMITED',
          `At most ${perDay} API keys may be created per user in 24 hours`,
          undefined,
          { 'Retry-After': String(budget?.resetSeconds ?? 1) },
        );
      }
      const { key, record } = created;
      return c.json(
        {
          id: record.id,
          name: record.name,
          key,
          createdAt: record.createdAt.toISOString(),
          expiresAt: record.expiresAt?.toISOString() ?? null,
        },
        201,
      );
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/user/api-keys',
      summary: "The caller's API keys (never their secrets)",
      responses: { 200: json(z.object({ data: z.array(keySchema) }), 'The keys'), ...errors },
    }),
    async (c) => {
      const caller = await ctx.auth.requireCaller(c);
      return c.json({ data: (await listApiKeys(ctx.sql, caller.userId)).map(toKey) }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'delete',
      path: '/api/user/api-keys/{id}',
      summary: 'Revoke one of the caller’s keys',
      request: {
        params: z.object({
          id: z
            .string()
            .min(1)
            .max(64)
            .overwrite(storable)
            .openapi({ param: { name: 'id', in: 'path' } }),
        }),
      },
      responses: { 200: json(z.object({ success: z.literal(true) }), 'Revoked'), ...errors },
    }),
    async (c) => {
      const caller = await ctx.auth.requireCaller(c);
      if (!(await revokeApiKey(ctx.sql, caller.userId, c.req.valid('param').id))) {
        throw new ApiError('API_KEY_NOT_FOUND', 'API key not found');
      }
      return c.json({ success: true as const }, 200);
    },
  );

  return app;
}
