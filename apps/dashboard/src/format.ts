const integer = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });

export const formatInt = (n: number) => integer.format(n);
export const formatDecimal = (n: number) => decimal.format(n);
export const formatPercent = (n: number) => `${decimal.format(n)}%`;

export function formatDuration(seconds: number): string {
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  return `${Math.floor(m / 60)}h ${m % 60}m`;
}

/** The change from `before` to `now` as text that reads without colour: an arrow and a sign. */
export function formatChange(
  now: number,
  before: number,
): { text: string; direction: 'up' | 'down' | 'same' } {
  if (before === 0)
    return now === 0 ? { text: '= 0%', direction: 'same' } : { text: '▲ new', direction: 'up' };
  const change = ((now - before) / before) * 100;
  if (Math.abs(change) < 0.05) return { text: '= 0%', direction: 'same' };
  return change > 0
    ? { text: `▲ +${change.toFixed(1)}%`, direction: 'up' }
    : { text: `▼ ${change.toFixed(1)}%`, direction: 'down' };
}

export function formatTime(iso: string, timeZone: string): string {
  return new Date(iso).toLocaleString('en-GB', { timeZone, dateStyle: 'medium', timeStyle: 'medium' });
}
