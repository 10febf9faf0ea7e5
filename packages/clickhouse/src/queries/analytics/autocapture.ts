import { toIso } from '@trackhouse/core';
import type { ClickHouse } from '../../client';
import { type CommonParams, Params } from '../builder';
import { fromEventsOfType } from './errors';
import { rankedPage } from './shared';

export const AUTOCAPTURE_READ_TYPES = [
  'button_click',
  'copy',
  'form_submit',
  'input_change',
  'outbound',
] as const;
export type AutocaptureReadType = (typeof AUTOCAPTURE_READ_TYPES)[number];

/**
 * The property an event of each type is listed by, as the browser client names it: a button's
 * text, the copied text, a form's name (else its id, else its action), a field's name (the
 * client's `inputName`: name, id, label or placeholder), an outbound link's URL. The first
 * non-empty key wins.
 */
export const AUTOCAPTURE_VALUE_KEYS: Record<AutocaptureReadType, readonly string[]> = {
  button_click: ['text'],
  copy: ['text'],
  form_submit: ['formName', 'formId', 'formAction'],
  input_change: ['inputName'],
  outbound: ['url'],
};

export interface AutocaptureItem {
  value: string;
  count: number;
  sessionCount: number;
  lastOccurred: string;
}

/**
 * Values of one autocaptured type in range (the events matching the filters), ranked by events
 * (ties by value, byte order), with the distinct sessions and the latest event of each; events
 * without a value left out. One page and how many values there are.
 */
export async function autocaptureEvents(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  type: AutocaptureReadType,
  page: { limit: number; offset: number },
): Promise<{ data: AutocaptureItem[]; totalCount: number }> {
  const run = (limit: number, offset: number) => {
    const p = new Params();
    const keys = AUTOCAPTURE_VALUE_KEYS[type].map((k) => `props[${p.bind('String', k)}]`);
    const value =
      keys.length === 1 ? keys[0]! : `multiIf(${keys.map((k) => `${k} != '', ${k}`).join(', ')}, '')`;
    return ch.query<{ v: string; n: number; s: number; last: string; n_values: number }>(
      `SELECT v, count() AS n, uniqExact(session_id) AS s, toString(max(timestamp)) AS last,
         count() OVER () AS n_values
       FROM (SELECT ${value} AS v, session_id, timestamp ${fromEventsOfType(p, siteId, common, type)})
       WHERE v != ''
       GROUP BY v
       ORDER BY n DESC, v ASC
       LIMIT ${p.bind('UInt32', limit)} OFFSET ${p.bind('UInt32', offset)}`,
      p.values,
    );
  };
  const { rows, totals } = await rankedPage(run, page);
  return {
    totalCount: totals?.n_values ?? 0,
    data: rows.map((r) => ({ value: r.v, count: r.n, sessionCount: r.s, lastOccurred: toIso(r.last) })),
  };
}

/**
 * Every value a goal or funnel step on the type can match (each of the type's keys, not only the
 * first non-empty one: a form by its name, its id or its action), ranked by the events carrying
 * it (an event counts once per value, whichever keys hold it; ties by value, byte order); at most
 * `limit` of them.
 */
export async function autocaptureValues(
  ch: ClickHouse,
  siteId: number,
  common: CommonParams,
  type: AutocaptureReadType,
  limit: number,
): Promise<{ value: string; count: number }[]> {
  const p = new Params();
  const keys = AUTOCAPTURE_VALUE_KEYS[type].map((k) => `props[${p.bind('String', k)}]`);
  const rows = await ch.query<{ v: string; n: number }>(
    `SELECT v, count() AS n
     FROM (SELECT arrayJoin(arrayDistinct([${keys.join(', ')}])) AS v ${fromEventsOfType(p, siteId, common, type)})
     WHERE v != ''
     GROUP BY v
     ORDER BY n DESC, v ASC
     LIMIT ${p.bind('UInt32', limit)}`,
    p.values,
  );
  return rows.map((r) => ({ value: r.v, count: r.n }));
}
