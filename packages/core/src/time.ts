/** ISO 8601 UTC with milliseconds, the one timestamp format of every response. */
export function toIso(value: Date | string | number): string {
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'number') return new Date(value).toISOString();
  // ClickHouse DateTime64 text: "2026-11-21 04:11:56.019" (UTC by column type).
  const normalized = /^\d{4}-\d{2}-\d{2} /.test(value) ? `${value.replace(' ', 'T')}Z` : value;
  return new Date(normalized).toISOString();
}

let formattedMs = Number.NaN;
let formatted = '';

/**
 * "YYYY-MM-DD HH:MM:SS.mmm" in UTC, the text form ClickHouse accepts for DateTime64(3).
 * Events arrive many per millisecond, so the last result is reused.
 */
export function toClickHouseDateTime(date: Date): string {
  const ms = date.getTime();
  if (ms !== formattedMs) {
    formattedMs = ms;
    const iso = date.toISOString();
    formatted = `${iso.slice(0, 10)} ${iso.slice(11, 23)}`;
  }
  return formatted;
}

const pad2 = (n: number) => (n < 10 ? `0${n}` : String(n));

/** First instant of the UTC calendar month after `now`. */
export function startOfNextUtcMonth(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
}

/** "YYYY-MM" of the UTC calendar month, the key of monthly quotas. */
export function utcMonthKey(now: Date): string {
  return `${now.getUTCFullYear()}-${pad2(now.getUTCMonth() + 1)}`;
}

/** "YYYY-MM-DD" of the UTC day, the key of daily salts. */
export function utcDayKey(now: Date): string {
  return `${now.getUTCFullYear()}-${pad2(now.getUTCMonth() + 1)}-${pad2(now.getUTCDate())}`;
}

export function secondsUntil(target: Date, now: Date): number {
  return Math.max(1, Math.ceil((target.getTime() - now.getTime()) / 1000));
}
