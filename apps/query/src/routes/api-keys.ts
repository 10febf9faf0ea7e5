import { createRoute, z } from '@hono/zod-openapi';
import { ApiError } from '@trackhouse/core';
import { type ApiKeyRecord, createApiKey, listApiKeys, revokeApiKey } from '@trackhouse/postgres';
import { type QueryContext, router } from '../context';
import { errors, json } from '../schemas';

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

export function apiKeyRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'post',
      path: '/api/user/api-keys',
      summary: "Create an API key for the caller's user; the key is shown once",
      request: {
        body: {
          content: {
            'application/json': {
              schema: z.strictObject({
                name: z.string().trim().min(1).max(200),
                expiresInDays: z.number().int().min(1).max(3650).optional(),
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
        ...errors,
      },
    }),
    async (c) => {
      const caller = await ctx.auth.requireCaller(c);
      const { name, expiresInDays } = c.req.valid('json');
      const expiresAt = expiresInDays ? new Date(Date.now() + expiresInDays * 86_400_000) : null;
      const { key, record } = await createApiKey(ctx.sql, { userId: caller.userId, name, expiresAt });
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
