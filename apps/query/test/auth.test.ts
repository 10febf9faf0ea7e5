import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQueryHarness, type QueryHarness } from './harness';

let h: QueryHarness;
beforeAll(async () => {
  h = await createQueryHarness({ QUERY_RATE_LIMIT_MAX: '100000' });
});
afterAll(async () => {
  await h.close();
});

type Need = 'read' | 'member' | 'admin';
interface ProtectedRoute {
  method: string;
  path: (siteId: number, goalId: number) => string;
  body?: unknown;
  need: Need;
}

const goalBody = { name: 'g', goalType: 'path', config: { pathPattern: '/x' } };
const ROUTES: ProtectedRoute[] = [
  { method: 'GET', path: (s) => `/api/sites/${s}`, need: 'read' },
  { method: 'GET', path: (s) => `/api/sites/${s}/goals`, need: 'read' },
  { method: 'GET', path: (s, g) => `/api/sites/${s}/goals/${g}/sessions`, need: 'read' },
  { method: 'GET', path: (s) => `/api/sites/${s}/events`, need: 'read' },
  { method: 'GET', path: (s) => `/api/sites/${s}/events/names`, need: 'read' },
  { method: 'GET', path: (s) => `/api/sites/${s}/events/properties?event_name=x`, need: 'read' },
  { method: 'GET', path: (s) => `/api/sites/${s}/events/outbound`, need: 'read' },
  {
    method: 'GET',
    path: (s) => `/api/sites/${s}/overview?compare=previous&start_date=2026-03-01&end_date=2026-03-02`,
    need: 'read',
  },
  { method: 'GET', path: (s) => `/api/sites/${s}/overview-bucketed?bucket=week`, need: 'read' },
  { method: 'GET', path: (s) => `/api/sites/${s}/metric?parameter=pathname`, need: 'read' },
  { method: 'GET', path: (s) => `/api/sites/${s}/sessions`, need: 'read' },
  { method: 'GET', path: (s) => `/api/sites/${s}/users`, need: 'read' },
  { method: 'GET', path: (s) => `/api/sites/${s}/live-user-count`, need: 'read' },
  { method: 'POST', path: (s) => `/api/sites/${s}/goals`, body: goalBody, need: 'member' },
  { method: 'PUT', path: (s, g) => `/api/sites/${s}/goals/${g}`, body: goalBody, need: 'member' },
  { method: 'DELETE', path: (s, g) => `/api/sites/${s}/goals/${g}`, need: 'member' },
  { method: 'GET', path: (s) => `/api/sites/${s}/excluded-ips`, need: 'member' },
  { method: 'GET', path: (s) => `/api/sites/${s}/excluded-countries`, need: 'member' },
  { method: 'DELETE', path: (s) => `/api/sites/${s}`, need: 'admin' },
  { method: 'PUT', path: (s) => `/api/sites/${s}/config`, body: { public: false }, need: 'admin' },
  { method: 'GET', path: (s) => `/api/sites/${s}/private-link-config`, need: 'admin' },
  {
    method: 'POST',
    path: (s) => `/api/sites/${s}/private-link-config`,
    body: { action: 'revoke_private_link_key' },
    need: 'admin',
  },
  { method: 'GET', path: (s) => `/api/sites/${s}/users?search=x`, need: 'member' },
  { method: 'GET', path: (s) => `/api/sites/${s}/user-traits/keys`, need: 'member' },
  { method: 'GET', path: (s) => `/api/sites/${s}/user-traits/values?key=plan`, need: 'member' },
  { method: 'GET', path: (s) => `/api/sites/${s}/user-traits/users?key=plan&value=pro`, need: 'member' },
  { method: 'GET', path: (s) => `/api/sites/${s}/session-replay/list`, need: 'member' },
];

/**
 * Every protected route through the same cases: no key, a bad key, a key of another
 * organization, a role short of the route's need, a public site, a private link, an unknown site.
 */
describe.each(
  ROUTES.map(
    (r) =>
      [
        `${r.method} ${r
          .path(1, 2)
          .replace(/\/1(?=\/|$|\?)/, '/:site')
          .replace('/2', '/:goal')}`,
        r,
      ] as const,
  ),
)('%s', (_, route) => {
  let owner: Awaited<ReturnType<QueryHarness['tenant']>>;
  let goalId: number;
  let linkKey: string;
  const call = (
    siteId: number,
    init: { key?: string; headers?: Record<string, string> } = {},
    goal = goalId,
  ) => h.json(route.path(siteId, goal), { method: route.method, body: route.body, ...init });

  beforeAll(async () => {
    owner = await h.tenant('owner');
    const created = await h.json<{ goalId: number }>(`/api/sites/${owner.siteId}/goals`, {
      key: owner.key,
      method: 'POST',
      body: goalBody,
    });
    goalId = created.body.goalId;
    const link = await h.json<{ data: { privateLinkKey: string } }>(
      `/api/sites/${owner.siteId}/private-link-config`,
      {
        key: owner.key,
        method: 'POST',
        body: { action: 'generate_private_link_key' },
      },
    );
    linkKey = link.body.data.privateLinkKey;
  });

  it('401 MISSING_API_KEY without credentials on a private site', async () => {
    const res = await call(owner.siteId);
    expect([res.status, res.body.code]).toEqual([401, 'MISSING_API_KEY']);
  });

  it('401 INVALID_API_KEY for an unknown key', async () => {
    const res = await call(owner.siteId, { key: `th_${'x'.repeat(40)}` });
    expect([res.status, res.body.code, res.body.error]).toEqual([401, 'INVALID_API_KEY', 'Invalid API key']);
  });

  it('403 ACCESS_DENIED for a key of another organization', async () => {
    const stranger = await h.tenant('owner', false);
    const res = await call(owner.siteId, { key: stranger.key });
    expect([res.status, res.body.code, res.body.error]).toEqual([403, 'ACCESS_DENIED', 'Access denied']);
  });

  it(`needs the ${route.need === 'admin' ? 'admin or owner role' : 'membership'} it declares`, async () => {
    const member = await h.member(owner.organizationId, 'member');
    const res = await call(owner.siteId, { key: member.key });
    if (route.need === 'admin') expect([res.status, res.body.code]).toEqual([403, 'FORBIDDEN_ROLE']);
    else expect(res.status).toBeLessThan(300);
  });

  it(
    route.need === 'read' ? 'is open to anyone on a public site' : 'stays closed on a public site',
    async () => {
      const site = await h.tenant('owner');
      await h.json(`/api/sites/${site.siteId}/config`, {
        key: site.key,
        method: 'PUT',
        body: { public: true },
      });
      const g = await h.json<{ goalId: number }>(`/api/sites/${site.siteId}/goals`, {
        key: site.key,
        method: 'POST',
        body: goalBody,
      });
      const res = await call(site.siteId, {}, g.body.goalId);
      if (route.need === 'read') expect(res.status).toBe(200);
      else expect([res.status, res.body.code]).toEqual([401, 'MISSING_API_KEY']);
    },
  );

  it(route.need === 'read' ? 'is open to the private link key' : 'ignores the private link key', async () => {
    const res = await call(owner.siteId, { headers: { 'x-private-key': linkKey } });
    if (route.need === 'read') expect(res.status).toBe(200);
    else expect(res.status).toBe(401);
    const other = linkKey.endsWith('0') ? '1' : '0';
    const wrong = await call(owner.siteId, {
      headers: { 'x-private-key': `${linkKey.slice(0, -1)}${other}` },
    });
    expect(wrong.status).toBe(401);
  });

  it('404 SITE_NOT_FOUND for an unknown site, 400 for a malformed id', async () => {
    const res = await call(987_654, { key: owner.key });
    expect([res.status, res.body.code]).toEqual([404, 'SITE_NOT_FOUND']);
    const bad = await h.json(route.path(1, 2).replace(/\/1(?=\/|$|\?)/, '/abc'), {
      method: route.method,
      body: route.body,
      key: owner.key,
    });
    expect(bad.status).toBe(400);
  });
});

describe('query rate limit', () => {
  it('429 past QUERY_RATE_LIMIT_MAX per key, with headers', async () => {
    const limited = await createQueryHarness(
      { QUERY_RATE_LIMIT_MAX: '3', QUERY_RATE_LIMIT_WINDOW_S: '60' },
      h.ch,
    );
    try {
      const t = await limited.tenant();
      for (let i = 0; i < 3; i++) {
        const ok = await limited.request(`/api/sites/${t.siteId}`, { key: t.key });
        expect(ok.status).toBe(200);
        expect(ok.headers.get('ratelimit-remaining')).toBe(String(2 - i));
      }
      const res = await limited.json(`/api/sites/${t.siteId}`, { key: t.key });
      expect(res.status).toBe(429);
      expect(res.body).toEqual({
        success: false,
        error: 'Rate limit exceeded. Maximum 3 requests per 1 minute per API key.',
        code: 'RATE_LIMITED',
      });
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      await limited.close();
    }
  });
});
