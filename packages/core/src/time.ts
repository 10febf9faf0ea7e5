/** ISO 8601 UTC with milliseconds, the one timestamp format of every response. */
export function toIso(value: Date | string | number): string {
  if (value instanceof Date) return value.toISOString();
  if (typeof value === 'number') return new Date(value).toISOString();
  // ClickHouse DateTime64 text: "2026-11-21 04:11:56.019" (UTC by column type).
  const normalized = /^\d{4}-\d{2}-\d{2} /.test(value) ? `${value.replace(' ', 'T')}Z` : value;
  return new Date(normalized).toISOString();
}

/** "YYYY-MM-DD HH:MM:SS.mmm" in UTC, the text form ClickHouse accepts for DateTime64(3). */
export function toClickHouseDateTime(date: Date): string {
  return date.toISOString().replace('T', ' ').replace('Z', '');
}

/** First instant of the UTC calendar month after `now`. */
export function startOfNextUtcMonth(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
}

/** "YYYY-MM" of the UTC calendar month, the key of monthly quotas. */
export function utcMonthKey(now: Date): string {
  return now.toISOString().slice(0, 7);
}

/** "YYYY-MM-DD" of the UTC day, the key of daily salts. */
export function utcDayKey(now: Date): string {
  return now.toISOString().slice(0, 10);
}

export function secondsUntil(target: Date, now: Date): number {
  return Math.max(1, Math.ceil((target.getTime() - now.getTime()) / 1000));
}
