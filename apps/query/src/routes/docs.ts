import type { OpenAPIHono } from '@hono/zod-openapi';
import type { HttpEnv } from '@trackhouse/core';

/**
 * GET /api/openapi.json from the route schemas, and GET /api/docs: a self-contained reference
 * page that renders it (no external scripts, so it works offline and under strict CSPs).
 */
export function mountDocs(app: OpenAPIHono<HttpEnv>): void {
  app.doc31('/api/openapi.json', {
    openapi: '3.1.0',
    info: {
      title: 'trackhouse query API',
      version: '0.1.0',
      description:
        'Sites, goals, events, traffic analytics (overview, time series, breakdowns, sessions, users, live count, export), organizations and API keys. Authenticate with `Authorization: Bearer <key>`; public sites and private links (`x-private-key`) can read without a key.',
    },
  });
  app.get('/api/docs', (c) => c.html(REFERENCE_PAGE));
}

const REFERENCE_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>trackhouse API reference</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1d1d1f}
h1{margin-bottom:0}.op{border:1px solid #ddd;border-radius:6px;margin:1rem 0;padding:.5rem 1rem}
.m{display:inline-block;min-width:4.5rem;font-weight:700;text-transform:uppercase}
.get{color:#0a7}.post{color:#06c}.put{color:#b60}.delete{color:#c22}
code,pre{font:13px ui-monospace,monospace;background:#f5f5f7;padding:.1rem .3rem;border-radius:3px}
pre{padding:.5rem;overflow:auto}table{border-collapse:collapse}td{padding:.1rem .6rem .1rem 0;vertical-align:top}
</style></head><body><h1>trackhouse API reference</h1><p id="intro"></p><div id="ops">Loading…</div>
<script>
fetch('openapi.json').then(r => r.json()).then(doc => {
  const esc = s => String(s ?? '').replace(/[&<>"]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
  document.getElementById('intro').textContent = doc.info.description || '';
  const ops = [];
  for (const [path, item] of Object.entries(doc.paths)) for (const [method, op] of Object.entries(item)) ops.push({ path, method, op });
  document.getElementById('ops').innerHTML = ops.map(({ path, method, op }) => {
    const params = (op.parameters || []).map(p => '<tr><td><code>' + esc(p.name) + '</code></td><td>' + esc(p.in) + (p.required ? ', required' : '') + '</td><td>' + esc(p.schema && (p.schema.type || '')) + '</td></tr>').join('');
    const body = op.requestBody ? '<p>Body:</p><pre>' + esc(JSON.stringify(op.requestBody.content['application/json'].schema, null, 2)) + '</pre>' : '';
    const responses = Object.entries(op.responses || {}).map(([code, r]) => '<code>' + code + '</code> ' + esc(r.description)).join(' · ');
    return '<div class="op"><p><span class="m ' + method + '">' + method + '</span><code>' + esc(path) + '</code></p><p>' + esc(op.summary) + '</p>' + (params ? '<table>' + params + '</table>' : '') + body + '<p>' + responses + '</p></div>';
  }).join('');
});
</script></body></html>`;
