import type uPlot from 'uplot';
import { ApiError, apiKey, get, params, type Query, request } from './api';
import { timeSeries } from './chart';
import { h, replace } from './dom';
import { formatChange, formatDecimal, formatDuration, formatInt, formatPercent, formatTime } from './format';
import { bucketFor, type Preset, presetRange, type Range } from './ranges';
import type {
  Bucket,
  Filter,
  Goal,
  MetricItem,
  MetricParameter,
  Site,
  Summary,
  TrackedEvent,
  TrafficSession,
} from './types';

const FIGURES: { key: keyof Summary; label: string; format: (n: number) => string }[] = [
  { key: 'users', label: 'Visitors', format: formatInt },
  { key: 'sessions', label: 'Sessions', format: formatInt },
  { key: 'pageviews', label: 'Pageviews', format: formatInt },
  { key: 'pages_per_session', label: 'Pages per session', format: formatDecimal },
  { key: 'bounce_rate', label: 'Bounce rate', format: formatPercent },
  { key: 'session_duration', label: 'Session duration', format: formatDuration },
];

/** For these a rise is bad news; the arrow still shows the direction, only the tone differs. */
const LOWER_IS_BETTER = new Set<keyof Summary>(['bounce_rate']);

const LISTS: { parameter: MetricParameter; title: string }[] = [
  { parameter: 'pathname', title: 'Pages' },
  { parameter: 'entry_page', title: 'Entry pages' },
  { parameter: 'exit_page', title: 'Exit pages' },
  { parameter: 'referrer', title: 'Referrers' },
  { parameter: 'channel', title: 'Channels' },
  { parameter: 'country', title: 'Countries' },
  { parameter: 'browser', title: 'Browsers' },
  { parameter: 'operating_system', title: 'Operating systems' },
  { parameter: 'device_type', title: 'Devices' },
  { parameter: 'event_name', title: 'Custom events' },
];

const PRESETS: { preset: Exclude<Preset, 'custom'>; label: string }[] = [
  { preset: 'today', label: 'Today' },
  { preset: '7d', label: '7 days' },
  { preset: '30d', label: '30 days' },
  { preset: 'month', label: 'This month' },
];

const LABEL = Object.fromEntries(LISTS.map((l) => [l.parameter, l.title])) as Record<MetricParameter, string>;

interface State {
  range: Range;
  timeZone: string;
  filters: Filter[];
}

function browserTimeZone(): string {
  return Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
}

function timeZones(current: string): string[] {
  const all = typeof Intl.supportedValuesOf === 'function' ? Intl.supportedValuesOf('timeZone') : [];
  return [...new Set([current, 'UTC', ...all])];
}

export async function renderSite(
  main: HTMLElement,
  siteId: number,
  opts: { onUnauthorized: () => void; link: (path: string) => EventListener },
): Promise<void> {
  const timeZone = browserTimeZone();
  const state: State = { range: presetRange('7d', timeZone), timeZone, filters: [] };
  let chart: uPlot | undefined;
  let generation = 0;

  const title = h('h1', {}, `Site ${siteId}`);
  const toolbar = h('div', { class: 'toolbar', role: 'group', 'aria-label': 'Date range and time zone' });
  const chips = h('div', { class: 'chips', 'aria-live': 'polite' });
  const live = h('p', { class: 'live', 'aria-live': 'polite' });
  const settingsSlot = h('span', { class: 'settings-link' });
  const figures = h('section', { class: 'figures', 'aria-label': 'Overview' });
  const chartBox = h('section', { class: 'card chart', 'aria-label': 'Pageviews and sessions over time' });
  const lists = h('div', { class: 'lists' });
  const goals = h('section', { class: 'card', 'aria-labelledby': 'goals-title' });
  const sessions = h('section', { class: 'card', 'aria-labelledby': 'sessions-title' });
  const sessionDetail = h('section', { class: 'card', id: 'session-detail', hidden: true });
  const events = h('section', { class: 'card', 'aria-labelledby': 'events-title' });
  const exportBar = h('div', { class: 'export' });
  const status = h('p', { class: 'error', role: 'alert', hidden: true });

  replace(
    main,
    h('div', { class: 'site-head' }, h('div', { class: 'title-row' }, title, settingsSlot), live),
    toolbar,
    chips,
    status,
    figures,
    chartBox,
    lists,
    h('div', { class: 'pair' }, goals, sessions),
    sessionDetail,
    events,
    exportBar,
  );

  const query = (): Query => ({
    start: state.range.start,
    end: state.range.end,
    timeZone: state.timeZone,
    filters: state.filters,
  });
  const api = <T>(path: string, extra?: Record<string, string | number | undefined>, withRange = true) =>
    get<T>(`/api/sites/${siteId}/${path}${params(withRange ? query() : undefined, extra)}`, siteId);

  function renderToolbar(): void {
    const start = h('input', { type: 'date', value: state.range.start, 'aria-label': 'Start date' });
    const end = h('input', { type: 'date', value: state.range.end, 'aria-label': 'End date' });
    const applyCustom = () => {
      if (!start.value || !end.value || start.value > end.value) return;
      state.range = { preset: 'custom', start: start.value, end: end.value };
      void reload();
    };
    start.addEventListener('change', applyCustom);
    end.addEventListener('change', applyCustom);
    const tz = h(
      'select',
      { 'aria-label': 'Time zone' },
      timeZones(state.timeZone).map((z) => h('option', { value: z, selected: z === state.timeZone }, z)),
    );
    tz.addEventListener('change', () => {
      state.timeZone = tz.value;
      if (state.range.preset !== 'custom') state.range = presetRange(state.range.preset, state.timeZone);
      void reload();
    });
    replace(
      toolbar,
      PRESETS.map((p) =>
        h(
          'button',
          {
            type: 'button',
            class: 'preset',
            'aria-pressed': String(state.range.preset === p.preset),
            onclick: () => {
              state.range = presetRange(p.preset, state.timeZone);
              void reload();
            },
          },
          p.label,
        ),
      ),
      h(
        'span',
        { class: 'custom', 'aria-pressed': String(state.range.preset === 'custom') },
        start,
        '–',
        end,
      ),
      tz,
    );
  }

  function renderChips(): void {
    replace(
      chips,
      state.filters.map((f, i) =>
        h(
          'span',
          { class: 'chip', 'data-filter': f.parameter },
          `${LABEL[f.parameter] ?? f.parameter} is ${f.value[0]}`,
          h(
            'button',
            {
              type: 'button',
              'aria-label': `Remove filter ${LABEL[f.parameter] ?? f.parameter} is ${f.value[0]}`,
              onclick: () => {
                state.filters.splice(i, 1);
                void reload();
              },
            },
            '×',
          ),
        ),
      ),
    );
  }

  function addFilter(parameter: MetricParameter, value: string): void {
    state.filters = state.filters.filter((f) => f.parameter !== parameter);
    state.filters.push({ parameter, type: 'equals', value: [value] });
    void reload();
  }

  function renderFigures(data: Summary, previous: Summary | undefined): void {
    replace(
      figures,
      FIGURES.map((f) => {
        const change = previous ? formatChange(data[f.key], previous[f.key]) : undefined;
        const good =
          change && change.direction !== 'same' && (change.direction === 'up') !== LOWER_IS_BETTER.has(f.key);
        return h(
          'div',
          { class: 'figure card', 'data-metric': String(f.key), 'data-value': data[f.key] },
          h('span', { class: 'label' }, f.label),
          h('strong', { class: 'num' }, f.format(data[f.key])),
          change
            ? h(
                'span',
                {
                  class: `change ${change.direction === 'same' ? '' : good ? 'good' : 'bad'}`,
                  title: `Previous period: ${f.format(previous![f.key])}`,
                },
                change.text,
                h('span', { class: 'sr' }, ' against the previous period'),
              )
            : null,
        );
      }),
    );
  }

  function renderChart(buckets: Bucket[]): void {
    chart?.destroy();
    const box = h('div', { class: 'plot' });
    replace(
      chartBox,
      h('h2', {}, 'Pageviews and sessions', h('span', { class: 'muted' }, ` per ${bucketFor(state.range)}`)),
      box,
    );
    const drawn = timeSeries(box, buckets, state.timeZone, bucketFor(state.range) === 'hour');
    chart = drawn;
    // Follow the card's width (a phone turned sideways, a resized window).
    new ResizeObserver(() => {
      if (box.clientWidth > 0 && Math.abs(box.clientWidth - drawn.width) > 8)
        drawn.setSize({ width: box.clientWidth, height: 240 });
    }).observe(box);
    chartBox.dataset.points = String(buckets.length);
  }

  function renderList(parameter: MetricParameter, title: string, items: MetricItem[], total: number) {
    const unit = parameter === 'event_name' ? 'events' : 'sessions';
    return h(
      'section',
      { class: 'card list', 'data-list': parameter },
      h('h2', {}, title, h('span', { class: 'muted' }, ` (${formatInt(total)})`)),
      items.length === 0
        ? h('p', { class: 'muted' }, 'Nothing in this range.')
        : h(
            'ol',
            {},
            items.map((item) => {
              const bar = h('span', { class: 'bar', 'aria-hidden': 'true' });
              bar.style.width = `${Math.min(100, item.percentage)}%`;
              return h(
                'li',
                { 'data-value': item.value, 'data-count': item.count },
                bar,
                h(
                  'button',
                  {
                    type: 'button',
                    class: 'value',
                    title: `Filter by ${title.toLowerCase()}: ${item.value}`,
                    onclick: () => addFilter(parameter, item.value),
                  },
                  item.value,
                ),
                h('span', { class: 'count' }, formatInt(item.count), h('span', { class: 'sr' }, ` ${unit}`)),
                h('span', { class: 'pct' }, `${Math.round(item.percentage)}%`),
              );
            }),
          ),
    );
  }

  function renderGoals(list: Goal[]): void {
    replace(
      goals,
      h('h2', { id: 'goals-title' }, 'Goals'),
      list.length === 0
        ? h('p', { class: 'muted' }, 'No goals defined.')
        : h(
            'table',
            {},
            h('thead', {}, h('tr', {}, h('th', {}, 'Goal'), h('th', {}, 'Conversions'), h('th', {}, 'Rate'))),
            h(
              'tbody',
              {},
              list.map((g) =>
                h(
                  'tr',
                  { 'data-goal': g.goalId },
                  h('td', {}, g.name, h('span', { class: 'muted' }, ` (${g.goalType})`)),
                  h('td', {}, formatInt(g.total_conversions)),
                  h('td', {}, formatPercent(g.conversion_rate * 100)),
                ),
              ),
            ),
          ),
    );
  }

  async function openSession(id: string): Promise<void> {
    sessionDetail.hidden = false;
    replace(sessionDetail, h('p', { class: 'muted' }, 'Loading session…'));
    try {
      const { data } = await api<{
        data: { session: TrafficSession; events: TrackedEvent[]; hasMore: boolean };
      }>(`sessions/${encodeURIComponent(id)}`, { limit: 200 }, false);
      const s = data.session;
      replace(
        sessionDetail,
        h('h2', {}, 'Session ', h('code', {}, s.session_id)),
        h(
          'p',
          {},
          `${s.country || 'Unknown country'} · ${s.browser} · ${s.operating_system} · ${s.device_type} · `,
          `${formatInt(s.pageviews)} pageviews · ${formatDuration(s.session_duration)}`,
        ),
        h(
          'ol',
          { class: 'timeline' },
          data.events.map((e) =>
            h(
              'li',
              { 'data-type': e.type },
              h('time', { datetime: e.timestamp }, formatTime(e.timestamp, state.timeZone)),
              h(
                'span',
                { class: 'badge' },
                e.type === 'pageview' ? 'page' : e.type === 'custom_event' ? 'event' : e.type,
              ),
              e.type === 'custom_event' ? `${e.event_name} on ${e.pathname}` : e.pathname,
            ),
          ),
        ),
        data.hasMore ? h('p', { class: 'muted' }, 'Only the first 200 events are shown.') : null,
        h(
          'button',
          { type: 'button', class: 'quiet', onclick: () => (sessionDetail.hidden = true) },
          'Close',
        ),
      );
      sessionDetail.scrollIntoView({ block: 'nearest' });
    } catch (err) {
      replace(sessionDetail, h('p', { class: 'error', role: 'alert' }, (err as Error).message));
    }
  }

  function renderSessions(list: TrafficSession[], total: number): void {
    replace(
      sessions,
      h('h2', { id: 'sessions-title' }, 'Sessions', h('span', { class: 'muted' }, ` (${formatInt(total)})`)),
      list.length === 0
        ? h('p', { class: 'muted' }, 'No sessions in this range.')
        : h(
            'ul',
            { class: 'rows' },
            list.map((s) =>
              h(
                'li',
                {},
                h(
                  'button',
                  {
                    type: 'button',
                    class: 'value',
                    'data-session': s.session_id,
                    onclick: () => void openSession(s.session_id),
                  },
                  `${formatTime(s.session_start, state.timeZone)} · ${s.entry_page}`,
                ),
                h(
                  'span',
                  { class: 'muted' },
                  `${s.country || '—'} · ${s.browser} · ${formatInt(s.pageviews)} pv · ${formatDuration(s.session_duration)}`,
                ),
              ),
            ),
          ),
    );
  }

  function renderEvents(list: TrackedEvent[]): void {
    replace(
      events,
      h(
        'h2',
        { id: 'events-title' },
        'Latest events',
        h('span', { class: 'muted' }, ' (updated every 30 s)'),
      ),
      h(
        'ul',
        { class: 'rows events' },
        list.map((e) =>
          h(
            'li',
            { 'data-type': e.type, 'data-event': e.event_id },
            h('time', { datetime: e.timestamp }, formatTime(e.timestamp, state.timeZone)),
            h(
              'span',
              { class: 'badge' },
              e.type === 'pageview' ? 'page' : e.type === 'custom_event' ? 'event' : e.type,
            ),
            e.type === 'custom_event' ? `${e.event_name} on ${e.pathname}` : e.pathname,
          ),
        ),
      ),
    );
  }

  async function download(format: 'csv' | 'ndjson'): Promise<void> {
    const res = await request(`/api/sites/${siteId}/export${params(query(), { format })}`, siteId);
    const name =
      /filename="([^"]+)"/.exec(res.headers.get('content-disposition') ?? '')?.[1] ?? `export.${format}`;
    const url = URL.createObjectURL(await res.blob());
    const a = h('a', { href: url, download: name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  }

  replace(
    exportBar,
    h('span', {}, 'Export the range’s events:'),
    h('button', { type: 'button', onclick: () => void download('csv') }, 'CSV'),
    h('button', { type: 'button', onclick: () => void download('ndjson') }, 'NDJSON'),
  );

  async function refreshLive(): Promise<void> {
    const { count } = await api<{ count: number }>(
      'live-user-count',
      {
        time_zone: state.timeZone,
        filters: state.filters.length ? JSON.stringify(state.filters) : undefined,
      },
      false,
    );
    replace(live, h('span', { class: 'dot', 'aria-hidden': 'true' }), `${formatInt(count)} online now`);
    live.dataset.value = String(count);
  }

  /**
   * A "Settings" link for those the API lets change something: owners and admins (`isOwner`),
   * and members (goals), told apart from public or private-link viewers by a member-only read.
   */
  async function offerSettings(site: Site): Promise<void> {
    if (!apiKey.get()) return;
    if (!site.isOwner) {
      const member = await get(`/api/sites/${siteId}/excluded-ips`).then(
        () => true,
        () => false,
      );
      if (!member) return;
    }
    const path = `/sites/${siteId}/settings`;
    replace(settingsSlot, h('a', { href: path, onclick: opts.link(path) }, 'Settings'));
  }

  async function reload(): Promise<void> {
    const mine = ++generation;
    renderToolbar();
    renderChips();
    main.setAttribute('aria-busy', 'true');
    status.hidden = true;
    try {
      // Each part is drawn as soon as its answer arrives. The figures and the chart are asked
      // for first, alone: the engine answers a few queries at a time, and a dozen top lists
      // asked together would queue the chart behind them. The page counts as loaded once all
      // parts are drawn.
      const show = <T>(answer: Promise<T>, draw: (value: T) => void) =>
        answer.then((value) => {
          if (mine === generation) draw(value);
        });
      const live = refreshLive();
      live.catch(() => {}); // reported below, with the second group, not as unhandled meanwhile
      await Promise.all([
        show(api<{ data: Summary; previous?: Summary }>('overview', { compare: 'previous' }), (o) =>
          renderFigures(o.data, o.previous),
        ),
        show(api<{ data: Bucket[] }>('overview-bucketed', { bucket: bucketFor(state.range) }), (b) =>
          renderChart(b.data),
        ),
      ]);
      if (mine !== generation) return;
      await Promise.all([
        show(
          Promise.all(
            LISTS.map((l) =>
              api<{ data: { data: MetricItem[]; totalCount: number } }>('metric', {
                parameter: l.parameter,
                limit: 10,
              }),
            ),
          ),
          (metrics) =>
            replace(
              lists,
              LISTS.map((l, i) =>
                renderList(l.parameter, l.title, metrics[i]!.data.data, metrics[i]!.data.totalCount),
              ),
            ),
        ),
        show(api<{ data: Goal[] }>('goals', { page_size: 100 }), (g) => renderGoals(g.data)),
        show(api<{ data: TrafficSession[]; totalCount: number }>('sessions', { limit: 20 }), (s) =>
          renderSessions(s.data, s.totalCount),
        ),
        show(api<{ data: TrackedEvent[] }>('events', { page_size: 30 }), (e) => renderEvents(e.data)),
        live,
      ]);
      if (mine !== generation) return;
      main.dataset.loaded = `${state.range.start}/${state.range.end}/${JSON.stringify(state.filters)}`;
    } catch (err) {
      if (err instanceof ApiError && (err.status === 401 || err.status === 403) && mine === generation) {
        opts.onUnauthorized();
        return;
      }
      status.hidden = false;
      status.textContent = (err as Error).message;
    } finally {
      main.removeAttribute('aria-busy');
    }
  }

  try {
    const site = await get<Site>(`/api/sites/${siteId}`, siteId);
    title.textContent = site.name;
    document.title = `${site.name} · trackhouse`;
    void offerSettings(site);
  } catch (err) {
    if (err instanceof ApiError && (err.status === 401 || err.status === 403)) return opts.onUnauthorized();
    if (err instanceof ApiError && err.status === 404) {
      replace(main, h('p', { class: 'error', role: 'alert' }, 'No such site.'));
      return;
    }
  }
  await reload();
  const timer = setInterval(() => {
    if (!main.isConnected) return clearInterval(timer);
    // The live count and the events stream follow new traffic without a reload.
    void refreshLive().catch(() => {});
    void api<{ data: TrackedEvent[] }>('events', { page_size: 30 })
      .then((r) => renderEvents(r.data))
      .catch(() => {});
  }, 30_000);
}
