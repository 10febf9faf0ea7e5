import { generateEvents, insertEvents } from '@trackhouse/clickhouse';
import { toClickHouseDateTime } from '@trackhouse/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQueryHarness, type QueryHarness } from './harness';

let h: QueryHarness;
beforeAll(async () => {
  h = await createQueryHarness({ QUERY_RATE_LIMIT_MAX: '100000' });
});
afterAll(async () => {
  await h.close();
});

describe('sites', () => {
  it('answers the Site object; isOwner for owners and admins only', async () => {
    const t = await h.tenant('owner');
    const res = await h.json(`/api/sites/${t.siteId}`, { key: t.key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: expect.any(String),
      siteId: t.siteId,
      name: 'Site',
      domain: 'example.com',
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updatedAt: expect.stringMatching(/Z$/),
      createdBy: t.userId,
      organizationId: t.organizationId,
      public: false,
      saltUserIds: false,
      blockBots: true,
      isOwner: true,
      trackOutbound: true,
      trackUrlParams: true,
      monthlyPageviewLimit: null,
      // The browser client's features: the defaults the official client and reference ship.
      trackErrors: false,
      webVitals: false,
      sessionReplay: false,
      trackButtonClicks: false,
      trackCopy: false,
      trackFormInteractions: false,
      trackInitialPageView: true,
      trackSpaNavigation: true,
    });
    const admin = await h.member(t.organizationId, 'admin');
    const member = await h.member(t.organizationId, 'member');
    expect((await h.json(`/api/sites/${t.siteId}`, { key: admin.key })).body.isOwner).toBe(true);
    expect((await h.json(`/api/sites/${t.siteId}`, { key: member.key })).body.isOwner).toBe(false);
    await h.json(`/api/sites/${t.siteId}/config`, { key: t.key, method: 'PUT', body: { public: true } });
    expect((await h.json(`/api/sites/${t.siteId}`)).body.isOwner).toBe(false);
  });

  it('updates any subset of the config, normalizes lists, and notifies ingest', async () => {
    const t = await h.tenant();
    const seen: number[] = [];
    const unsubscribe = await h.stores.channel.subscribe((id) => seen.push(id));
    const res = await h.json(`/api/sites/${t.siteId}/config`, {
      key: t.key,
      method: 'PUT',
      body: {
        excludedIPs: ['10.1.2.3/8', '::ffff:192.168.0.1', '2001:DB8::/32', '10.0.0.0/8'],
        excludedCountries: ['de', 'US', 'de'],
        monthlyPageviewLimit: 5000,
        blockBots: false,
        webVitals: true,
        trackCopy: true,
        trackSpaNavigation: false,
      },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      message: 'Site configuration updated',
      config: {
        public: false,
        saltUserIds: false,
        blockBots: false,
        excludedIPs: ['10.0.0.0/8', '192.168.0.1', '2001:db8::/32'],
        excludedCountries: ['DE', 'US'],
        trackOutbound: true,
        trackUrlParams: true,
        monthlyPageviewLimit: 5000,
        trackErrors: false,
        webVitals: true,
        sessionReplay: false,
        trackButtonClicks: false,
        trackCopy: true,
        trackFormInteractions: false,
        trackInitialPageView: true,
        trackSpaNavigation: false,
      },
    });
    expect(seen).toContain(t.siteId);
    await unsubscribe();
    expect((await h.json(`/api/sites/${t.siteId}/excluded-ips`, { key: t.key })).body).toEqual({
      success: true,
      excludedIPs: ['10.0.0.0/8', '192.168.0.1', '2001:db8::/32'],
    });
    expect((await h.json(`/api/sites/${t.siteId}/excluded-countries`, { key: t.key })).body).toEqual({
      success: true,
      excludedCountries: ['DE', 'US'],
    });
    const cleared = await h.json(`/api/sites/${t.siteId}/config`, {
      key: t.key,
      method: 'PUT',
      body: { monthlyPageviewLimit: null },
    });
    expect((cleared.body.config as { monthlyPageviewLimit: unknown }).monthlyPageviewLimit).toBeNull();
  });

  it.each([
    [{}, 'NO_FIELDS'],
    [{ colour: 'red' }, 'INVALID_PAYLOAD'],
    [{ excludedIPs: ['not-an-ip'] }, 'INVALID_PAYLOAD'],
    [{ excludedIPs: Array.from({ length: 101 }, (_, i) => `10.0.0.${i % 250}`) }, 'INVALID_PAYLOAD'],
    [{ excludedCountries: ['USA'] }, 'INVALID_PAYLOAD'],
    [{ monthlyPageviewLimit: -1 }, 'INVALID_PAYLOAD'],
    [{ public: 'yes' }, 'INVALID_PAYLOAD'],
    [{ sessionReplay: 1 }, 'INVALID_PAYLOAD'],
    [{ webVitals: null }, 'INVALID_PAYLOAD'],
  ])('rejects config %j with 400 %s', async (body, code) => {
    const t = await h.tenant();
    const res = await h.json(`/api/sites/${t.siteId}/config`, { key: t.key, method: 'PUT', body });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe(code);
    if (code === 'NO_FIELDS') expect(res.body.error).toBe('No fields to update');
  });

  it('renames a site and changes its domain with the config update; members may not', async () => {
    const t = await h.tenant();
    const res = await h.json(`/api/sites/${t.siteId}/config`, {
      key: t.key,
      method: 'PUT',
      body: { name: '  Docs  ', domain: 'Docs.Example.org', public: true },
    });
    expect(res.status).toBe(200);
    expect(res.body.config).not.toHaveProperty('name');
    const site = await h.json(`/api/sites/${t.siteId}`, { key: t.key });
    expect([site.body.name, site.body.domain, site.body.public]).toEqual(['Docs', 'docs.example.org', true]);
    for (const body of [{ name: '' }, { domain: 'not a domain' }, { name: 'x'.repeat(201) }]) {
      const bad = await h.json(`/api/sites/${t.siteId}/config`, { key: t.key, method: 'PUT', body });
      expect([bad.status, bad.body.code], JSON.stringify(body)).toEqual([400, 'INVALID_PAYLOAD']);
    }
    const member = await h.member(t.organizationId, 'member');
    const refused = await h.json(`/api/sites/${t.siteId}/config`, {
      key: member.key,
      method: 'PUT',
      body: { name: 'Mine' },
    });
    expect([refused.status, refused.body.code]).toEqual([403, 'FORBIDDEN_ROLE']);
    expect((await h.json(`/api/sites/${t.siteId}`, { key: t.key })).body.name).toBe('Docs');
  });

  it('generates, replaces and revokes the private link key', async () => {
    const t = await h.tenant();
    const path = `/api/sites/${t.siteId}/private-link-config`;
    expect((await h.json(path, { key: t.key })).body).toEqual({
      success: true,
      data: { privateLinkKey: null },
    });
    const first = await h.json<{ data: { privateLinkKey: string } }>(path, {
      key: t.key,
      method: 'POST',
      body: { action: 'generate_private_link_key' },
    });
    expect(first.body.data.privateLinkKey).toMatch(/^[0-9a-f]{32}$/);
    const second = await h.json<{ data: { privateLinkKey: string } }>(path, {
      key: t.key,
      method: 'POST',
      body: { action: 'generate_private_link_key' },
    });
    expect(second.body.data.privateLinkKey).not.toBe(first.body.data.privateLinkKey);
    expect((await h.json(path, { key: t.key })).body).toEqual({
      success: true,
      data: { privateLinkKey: second.body.data.privateLinkKey },
    });
    expect(
      (
        await h.json(`/api/sites/${t.siteId}`, {
          headers: { 'x-private-key': first.body.data.privateLinkKey },
        })
      ).status,
    ).toBe(401);
    expect(
      (
        await h.json(`/api/sites/${t.siteId}`, {
          headers: { 'x-private-key': second.body.data.privateLinkKey },
        })
      ).status,
    ).toBe(200);
    expect(
      (await h.json(path, { key: t.key, method: 'POST', body: { action: 'revoke_private_link_key' } })).body,
    ).toEqual({
      success: true,
      data: { privateLinkKey: null },
    });
    expect(
      (
        await h.json(`/api/sites/${t.siteId}`, {
          headers: { 'x-private-key': second.body.data.privateLinkKey },
        })
      ).status,
    ).toBe(401);
    const other = await h.json(path, { key: t.key, method: 'POST', body: { action: 'rotate' } });
    expect([other.status, other.body.code]).toEqual([400, 'INVALID_PAYLOAD']);
  });

  it('deletes the site with its goals, private link, every ClickHouse event, profile and replay', async () => {
    const t = await h.tenant();
    const keep = await h.tenant();
    await insertEvents(h.ch, [
      ...generateEvents({ siteId: t.siteId, events: 300, days: 3, seed: 3 }),
      ...generateEvents({ siteId: keep.siteId, events: 100, days: 3, seed: 4 }),
    ]);
    await h.json(`/api/sites/${t.siteId}/goals`, {
      key: t.key,
      method: 'POST',
      body: { name: 'g', goalType: 'path', config: { pathPattern: '/' } },
    });
    const count = async (siteId: number, table = 'events') =>
      (
        await h.ch.query<{ n: number }>(`SELECT count() AS n FROM ${table} WHERE site_id = {s:UInt32}`, {
          s: siteId,
        })
      )[0]!.n;
    // An identify call and a replay batch of each site (the views fill profiles and aliases).
    for (const siteId of [t.siteId, keep.siteId]) {
      await h.ch.writer.insert({
        table: 'identifies',
        values: [
          {
            site_id: siteId,
            user_id: 'anon',
            identified_user_id: 'u',
            traits: { plan: '"pro"' },
            is_new_identify: true,
          },
        ],
        format: 'JSONEachRow',
      });
      await h.ch.writer.insert({
        table: 'session_replay',
        values: [
          { site_id: siteId, timestamp: toClickHouseDateTime(new Date()), events: '[]', retention_days: 30 },
        ],
        format: 'JSONEachRow',
      });
    }
    expect(await count(t.siteId)).toBe(300);
    const derived = [
      'events_by_name',
      'sessions',
      'site_pages',
      'identifies',
      'user_profiles',
      'user_aliases',
      'session_replay',
      'session_facts',
      'session_paths',
      'visitor_days',
      'user_activity',
      'visitor_quarters',
      'visitor_hours',
      'sessions_by_visitor',
    ];
    for (const table of derived) expect(await count(t.siteId, table), table).toBeGreaterThan(0);
    const res = await h.json(`/api/sites/${t.siteId}`, { key: t.key, method: 'DELETE' });
    expect(res.body).toEqual({ success: true });
    expect(await count(t.siteId)).toBe(0);
    for (const table of derived) expect(await count(t.siteId, table), table).toBe(0);
    expect(await count(keep.siteId)).toBe(100);
    for (const table of derived) expect(await count(keep.siteId, table), table).toBeGreaterThan(0);
    const [goals] = await h.db.sql<
      { n: number }[]
    >`select count(*)::int as n from goals where site_id = ${t.siteId}`;
    expect(goals!.n).toBe(0);
    expect((await h.json(`/api/sites/${t.siteId}`, { key: t.key })).status).toBe(404);
    expect((await h.json(`/api/sites/${t.siteId}/events`, { key: t.key })).status).toBe(404);
  });
});

describe('goals CRUD', () => {
  it('creates, replaces and deletes goals of its own site only, validating configs', async () => {
    const t = await h.tenant();
    const other = await h.tenant();
    const created = await h.json<{ success: boolean; goalId: number }>(`/api/sites/${t.siteId}/goals`, {
      key: t.key,
      method: 'POST',
      body: {
        name: 'Buy',
        goalType: 'event',
        config: { eventName: 'purchase', eventPropertyKey: 'plan', eventPropertyValue: 'pro' },
      },
    });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ success: true, goalId: expect.any(Number) });
    const id = created.body.goalId;
    const put = await h.json(`/api/sites/${t.siteId}/goals/${id}`, {
      key: t.key,
      method: 'PUT',
      body: { name: 'Docs', goalType: 'path', config: { pathPattern: '/docs/**' } },
    });
    expect(put.body).toEqual({ success: true, goalId: id });
    const list = await h.json<{ data: Record<string, unknown>[] }>(`/api/sites/${t.siteId}/goals`, {
      key: t.key,
    });
    expect(list.body.data).toEqual([
      {
        goalId: id,
        name: 'Docs',
        goalType: 'path',
        config: { pathPattern: '/docs/**' },
        createdAt: expect.stringMatching(/Z$/),
        total_conversions: 0,
        total_sessions: 0,
        conversion_rate: 0,
      },
    ]);
    // Another site's path cannot reach this goal.
    const foreign = await h.json(`/api/sites/${other.siteId}/goals/${id}`, {
      key: other.key,
      method: 'DELETE',
    });
    expect([foreign.status, foreign.body.code]).toEqual([404, 'GOAL_NOT_FOUND']);
    expect((await h.json(`/api/sites/${other.siteId}/goals/${id}/sessions`, { key: other.key })).status).toBe(
      404,
    );
    expect(
      (await h.json(`/api/sites/${t.siteId}/goals/${id}`, { key: t.key, method: 'DELETE' })).body,
    ).toEqual({ success: true });
    expect(
      (await h.json(`/api/sites/${t.siteId}/goals/${id}`, { key: t.key, method: 'DELETE' })).status,
    ).toBe(404);

    for (const body of [
      { name: 'x', goalType: 'path', config: { pathPattern: 'no-slash' } },
      { name: 'x', goalType: 'path', config: {} },
      { name: 'x', goalType: 'event', config: { eventName: 'e', eventPropertyKey: 'k' } },
      { name: 'x', goalType: 'event', config: { pathPattern: '/' } },
      { name: '', goalType: 'path', config: { pathPattern: '/' } },
      { name: 'x', goalType: 'funnel', config: {} },
    ]) {
      const res = await h.json(`/api/sites/${t.siteId}/goals`, { key: t.key, method: 'POST', body });
      expect([res.status, res.body.code]).toEqual([400, 'INVALID_PAYLOAD']);
    }
  });
});

describe('organizations and API keys over HTTP', () => {
  it('creates sites for admins and owners, lists them for members', async () => {
    const t = await h.tenant('owner', false);
    const create = (
      key?: string,
      body: unknown = { name: 'Docs', domain: 'Docs.Example.com', public: true },
    ) => h.json(`/api/organizations/${t.organizationId}/sites`, { key, method: 'POST', body });
    const res = await create(t.key);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      name: 'Docs',
      domain: 'docs.example.com',
      public: true,
      isOwner: true,
      organizationId: t.organizationId,
      sessionReplay: false,
      trackErrors: false,
    });
    const featured = await create(t.key, {
      name: 'App',
      domain: 'app.example.com',
      sessionReplay: true,
      trackErrors: true,
      trackInitialPageView: false,
    });
    expect(featured.status).toBe(201);
    expect(featured.body).toMatchObject({
      sessionReplay: true,
      trackErrors: true,
      trackInitialPageView: false,
    });
    expect((await h.json(`/api/sites/${featured.body.siteId}`, { key: t.key })).body).toMatchObject({
      sessionReplay: true,
      trackErrors: true,
      trackInitialPageView: false,
      webVitals: false,
    });
    const member = await h.member(t.organizationId, 'member');
    expect((await create(member.key)).body.code).toBe('FORBIDDEN_ROLE');
    expect((await create()).body.code).toBe('MISSING_API_KEY');
    expect((await create((await h.tenant()).key)).body.code).toBe('ACCESS_DENIED');
    expect((await create(t.key, { name: 'x', domain: 'not a domain' })).status).toBe(400);
    const list = await h.json<{ data: { siteId: number; isOwner: boolean }[] }>(
      `/api/organizations/${t.organizationId}/sites`,
      { key: member.key },
    );
    expect(list.body.data.map((s) => [s.siteId, s.isOwner])).toEqual([
      [res.body.siteId, false],
      [featured.body.siteId, false],
    ]);
    expect((await h.json('/api/organizations/nope/sites', { key: t.key })).status).toBe(404);
  });

  it("lists the caller's organizations with the caller's role, and nobody else's", async () => {
    const t = await h.tenant('owner', false);
    const other = await h.tenant('admin', false);
    const member = await h.member(t.organizationId, 'member');
    const addOrg = await h.member(other.organizationId, 'member');
    type Orgs = { data: { id: string; name: string; role: string }[] };
    const own = await h.json<Orgs>('/api/user/organizations', { key: t.key });
    expect(own.status).toBe(200);
    expect(own.body.data).toEqual([{ id: t.organizationId, name: expect.any(String), role: 'owner' }]);
    const asMember = await h.json<Orgs>('/api/user/organizations', { key: member.key });
    expect(asMember.body.data.map((o) => [o.id, o.role])).toEqual([[t.organizationId, 'member']]);
    expect((await h.json<Orgs>('/api/user/organizations', { key: addOrg.key })).body.data).toHaveLength(1);
    expect((await h.json('/api/user/organizations')).body.code).toBe('MISSING_API_KEY');
    expect((await h.json('/api/user/organizations', { key: 'rb_nope' })).body.code).toBe('INVALID_API_KEY');
  });

  it('creates keys shown once, lists them without secrets, and revokes them', async () => {
    const t = await h.tenant();
    const created = await h.json<{
      id: string;
      key: string;
      name: string;
      expiresAt: string | null;
      createdAt: string;
    }>('/api/user/api-keys', {
      key: t.key,
      method: 'POST',
      body: { name: 'ci', expiresInDays: 30 },
    });
    expect(created.status).toBe(201);
    expect(created.body.key).toMatch(/^th_[0-9A-Za-z]{40}$/);
    expect(Date.parse(created.body.expiresAt!) - Date.now()).toBeGreaterThan(29 * 86_400_000);
    const list = await h.json<{ data: { id: string; name: string; revoked: boolean }[] }>(
      '/api/user/api-keys',
      { key: created.body.key },
    );
    expect(list.body.data.map((k) => k.name).sort()).toEqual(['ci', 'test']);
    expect(JSON.stringify(list.body)).not.toContain(created.body.key);
    expect((await h.json(`/api/sites/${t.siteId}`, { key: created.body.key })).status).toBe(200);
    expect(
      (await h.json(`/api/user/api-keys/${created.body.id}`, { key: t.key, method: 'DELETE' })).body,
    ).toEqual({ success: true });
    expect((await h.json(`/api/sites/${t.siteId}`, { key: created.body.key })).body.code).toBe(
      'INVALID_API_KEY',
    );
    const stranger = await h.tenant();
    expect(
      (await h.json(`/api/user/api-keys/${created.body.id}`, { key: stranger.key, method: 'DELETE' })).status,
    ).toBe(404);
    expect((await h.json('/api/user/api-keys')).status).toBe(401);
    expect(
      (await h.json('/api/user/api-keys', { key: t.key, method: 'POST', body: { name: '' } })).status,
    ).toBe(400);
  });
});

describe('browsers and documentation', () => {
  it('answers CORS preflights for any origin without credentials', async () => {
    const res = await h.app.request('/api/sites/1/events', {
      method: 'OPTIONS',
      headers: {
        origin: 'https://dash.example',
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'authorization,x-private-key',
      },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('x-private-key');
    expect(res.headers.get('access-control-allow-credentials')).toBeNull();
  });

  it('serves an OpenAPI 3.1 document of every route and a reference page', async () => {
    const doc = await h.json<{
      openapi: string;
      paths: Record<string, Record<string, unknown>>;
      components: { schemas: Record<string, { properties: Record<string, unknown> }> };
    }>('/api/openapi.json');
    expect(doc.body.openapi).toBe('3.1.0');
    for (const schema of ['Site', 'SiteConfig']) {
      expect(Object.keys(doc.body.components.schemas[schema]!.properties)).toEqual(
        expect.arrayContaining(['webVitals', 'trackErrors', 'sessionReplay', 'trackSpaNavigation']),
      );
    }
    expect(Object.keys(doc.body.paths).sort()).toEqual([
      '/api/organizations/{organizationId}/sites',
      '/api/sites/{siteId}',
      '/api/sites/{siteId}/config',
      '/api/sites/{siteId}/errors/events',
      '/api/sites/{siteId}/errors/names',
      '/api/sites/{siteId}/errors/time-series',
      '/api/sites/{siteId}/events',
      '/api/sites/{siteId}/events/autocapture',
      '/api/sites/{siteId}/events/autocapture/values',
      '/api/sites/{siteId}/events/names',
      '/api/sites/{siteId}/events/outbound',
      '/api/sites/{siteId}/events/properties',
      '/api/sites/{siteId}/excluded-countries',
      '/api/sites/{siteId}/excluded-ips',
      '/api/sites/{siteId}/export',
      '/api/sites/{siteId}/funnels',
      '/api/sites/{siteId}/funnels/analyze',
      '/api/sites/{siteId}/funnels/{funnelId}',
      '/api/sites/{siteId}/funnels/{stepNumber}/sessions',
      '/api/sites/{siteId}/goals',
      '/api/sites/{siteId}/goals/{goalId}',
      '/api/sites/{siteId}/goals/{goalId}/sessions',
      '/api/sites/{siteId}/journeys',
      '/api/sites/{siteId}/live-user-count',
      '/api/sites/{siteId}/metric',
      '/api/sites/{siteId}/overview',
      '/api/sites/{siteId}/overview-bucketed',
      '/api/sites/{siteId}/performance/by-dimension',
      '/api/sites/{siteId}/performance/overview',
      '/api/sites/{siteId}/performance/time-series',
      '/api/sites/{siteId}/private-link-config',
      '/api/sites/{siteId}/retention',
      '/api/sites/{siteId}/session-replay/list',
      '/api/sites/{siteId}/session-replay/{sessionId}',
      '/api/sites/{siteId}/sessions',
      '/api/sites/{siteId}/sessions/{sessionId}',
      '/api/sites/{siteId}/user-traits/keys',
      '/api/sites/{siteId}/user-traits/users',
      '/api/sites/{siteId}/user-traits/values',
      '/api/sites/{siteId}/users',
      '/api/sites/{siteId}/users/{userId}',
      '/api/user/api-keys',
      '/api/user/api-keys/{id}',
      '/api/user/organizations',
    ]);
    const page = await h.app.request('/api/docs');
    expect(page.headers.get('content-type')).toContain('text/html');
    expect(await page.text()).toContain('openapi.json');
  });
});
