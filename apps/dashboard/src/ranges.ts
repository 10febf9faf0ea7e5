export type Preset = 'today' | '7d' | '30d' | 'month' | 'custom';

export interface Range {
  preset: Preset;
  start: string;
  end: string;
}

/** Today's date (YYYY-MM-DD) in a time zone. */
export function todayIn(timeZone: string, now = new Date()): string {
  return new Intl.DateTimeFormat('en-CA', {
    timeZone,
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
  }).format(now);
}

export function addDays(date: string, days: number): string {
  const d = new Date(`${date}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() + days);
  return d.toISOString().slice(0, 10);
}

export function presetRange(preset: Exclude<Preset, 'custom'>, timeZone: string, now = new Date()): Range {
  const end = todayIn(timeZone, now);
  const start =
    preset === 'today'
      ? end
      : preset === '7d'
        ? addDays(end, -6)
        : preset === '30d'
          ? addDays(end, -29)
          : `${end.slice(0, 8)}01`;
  return { preset, start, end };
}

export function daysIn(range: Range): number {
  return Math.round((Date.parse(range.end) - Date.parse(range.start)) / 86_400_000) + 1;
}

/** A bucket giving a readable number of points: hours for a day or two, days up to a quarter. */
export function bucketFor(range: Range): 'hour' | 'day' | 'week' | 'month' {
  const days = daysIn(range);
  if (days <= 2) return 'hour';
  if (days <= 92) return 'day';
  if (days <= 730) return 'week';
  return 'month';
}
