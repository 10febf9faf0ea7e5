import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import type { Bucket } from './types';

/** At most this many x labels, whatever the number of buckets (phones included). */
const MAX_LABELS = 8;

/**
 * Pageviews and sessions per bucket. Series differ by line style as well as colour (dashed
 * sessions), so the chart reads without colour. X labels sit on bucket starts, written in the
 * dashboard's time zone: dates for day buckets and longer, hours for hourly ones.
 */
export function timeSeries(target: HTMLElement, buckets: Bucket[], timeZone: string, hourly: boolean): uPlot {
  const xs = buckets.map((b) => Date.parse(b.time) / 1000);
  const width = Math.max(260, target.clientWidth || 600);
  const every = Math.max(1, Math.ceil(xs.length / Math.min(MAX_LABELS, Math.floor(width / 70))));
  const label = new Intl.DateTimeFormat('en-GB', {
    timeZone,
    ...(hourly ? { hour: '2-digit', minute: '2-digit' } : { day: 'numeric', month: 'short' }),
  });
  return new uPlot(
    {
      width,
      height: 240,
      scales: { y: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
      series: [
        { value: (_u, v) => (v === null ? '' : label.format(v * 1000)) },
        { label: 'Pageviews', stroke: '#2563eb', width: 2, fill: 'rgba(37,99,235,0.08)' },
        { label: 'Sessions', stroke: '#b45309', width: 2, dash: [6, 4] },
      ],
      axes: [
        {
          splits: () => xs.filter((_, i) => i % every === 0),
          values: (_u, splits) => splits.map((s) => label.format(s * 1000)),
        },
        { size: 50 },
      ],
    },
    [xs, buckets.map((b) => b.pageviews), buckets.map((b) => b.sessions)],
    target,
  );
}
