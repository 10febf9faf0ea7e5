import { uuidv7FromSeed } from '@trackhouse/core';
import type { EventRow } from './pipeline';

export const SESSION_TIMEOUT_MS = 30 * 60 * 1000;

/** A batch event older than a session's timeout: it cannot belong to the visitor's live session. */
export function isBackdated(timestamp: Date | undefined, now: Date): boolean {
  return timestamp !== undefined && timestamp.getTime() < now.getTime() - SESSION_TIMEOUT_MS;
}

const millis = (row: EventRow) => Date.parse(`${row.timestamp.replace(' ', 'T')}Z`);

/**
 * Sessions of backdated events follow their own timestamps (docs/decisions.md). `rows` whose
 * `session_id` is empty are backdated: each visitor's, in time order, start a new session after
 * 30 minutes without events, and each session's id is derived from the site, the visitor and
 * the time of its first event, so a replayed batch gets the same ids. A visit split over two
 * batches whose events are over 30 minutes old is two sessions: batches are the unit here.
 */
export function assignBackdatedSessions(rows: EventRow[]): void {
  const byVisitor = new Map<string, EventRow[]>();
  for (const row of rows) {
    if (row.session_id !== '') continue;
    const key = `${row.site_id}:${row.user_id}`;
    const list = byVisitor.get(key);
    if (list) list.push(row);
    else byVisitor.set(key, [row]);
  }
  for (const [visitor, list] of byVisitor) {
    list.sort((a, b) => millis(a) - millis(b) || (a.event_id < b.event_id ? -1 : 1));
    let sessionId = '';
    let last = Number.NEGATIVE_INFINITY;
    for (const row of list) {
      const at = millis(row);
      if (at - last > SESSION_TIMEOUT_MS) sessionId = uuidv7FromSeed(at, `${visitor}:${at}`);
      row.session_id = sessionId;
      last = at;
    }
  }
}
