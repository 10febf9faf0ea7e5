import { serve } from '@hono/node-server';
import { Hono } from 'hono';

/** The reference point of `pnpm bench ingest`: parse the JSON body, answer, nothing else. */
const app = new Hono();
app.post('/api/track', async (c) => {
  await c.req.json();
  return c.json({ success: true });
});
app.post('/api/track/batch', async (c) => {
  const body = (await c.req.json()) as { events: unknown[] };
  return c.json({ success: true, accepted: body.events.length, rejected: 0 });
});
serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, (info) => {
  console.log(`trivial listening on http://127.0.0.1:${info.port}`);
});
