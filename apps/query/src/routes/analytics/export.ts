import { createRoute, z } from '@hono/zod-openapi';
import { EXPORT_FORMATS, type ExportFormat, exportEvents } from '@trackhouse/clickhouse';
import { toCommon } from '../../common';
import { type QueryContext, router } from '../../context';
import { errors, siteIdParam, withCommon } from '../../schemas';

const CONTENT_TYPE: Record<ExportFormat, string> = {
  ndjson: 'application/x-ndjson; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
};

/**
 * A web stream over the engine's chunks. The first chunk is awaited before answering, so a query
 * that fails at once is an error response; a failure later aborts the transfer (the client sees
 * an incomplete download, never a silently short file). A client that goes away cancels the query.
 */
async function bodyOf(chunks: AsyncIterable<Uint8Array>): Promise<ReadableStream<Uint8Array>> {
  const iterator = chunks[Symbol.asyncIterator]();
  let first: IteratorResult<Uint8Array> | undefined = await iterator.next();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const next = first ?? (await iterator.next());
      first = undefined;
      if (next.done) controller.close();
      else controller.enqueue(next.value);
    },
    async cancel() {
      await iterator.return?.();
    },
  });
}

export function exportRoutes(ctx: QueryContext) {
  const app = router();

  app.openapi(
    createRoute({
      method: 'get',
      path: '/api/sites/{siteId}/export',
      summary: 'Every event of the range (errors included), oldest first, streamed as a download',
      request: {
        params: siteIdParam,
        query: withCommon({ format: z.enum(EXPORT_FORMATS).default('ndjson') }),
      },
      responses: {
        200: {
          content: {
            'application/x-ndjson': { schema: z.string().openapi({ description: 'One Event per line' }) },
            'text/csv': {
              schema: z.string().openapi({ description: 'A header row, then one Event per row' }),
            },
          },
          description: 'Events as an attachment',
        },
        ...errors,
      },
    }),
    async (c) => {
      const { site } = await ctx.auth.site(c, c.req.valid('param').siteId, 'read');
      const q = c.req.valid('query');
      const body = await bodyOf(exportEvents(ctx.ch, site.siteId, toCommon(q), q.format));
      const name = `trackhouse-site-${site.siteId}-${q.start_date ?? 'start'}-${q.end_date ?? 'now'}.${q.format}`;
      return c.body(body, 200, {
        'Content-Type': CONTENT_TYPE[q.format],
        'Content-Disposition': `attachment; filename="${name}"`,
        'Cache-Control': 'no-store',
      });
    },
  );

  return app;
}
