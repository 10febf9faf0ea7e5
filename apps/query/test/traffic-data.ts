import type { StoredEvent } from '@trackhouse/clickhouse';
import { uuidv7 } from '@trackhouse/core';

/**
 * Hand-made events for the traffic analytics tests: sessions crossing local midnights and the
 * DST changes of 2026 (spring and autumn), one-event sessions, sessions without pageviews, error
 * events, an identified visitor on two devices, two members on one device, events sharing a
 * millisecond, values that tie on count, and text a spreadsheet would run as a formula.
 */
export function craftedEvents(template: StoredEvent): StoredEvent[] {
  const at = (iso: string, minutes = 0) => Date.parse(iso) + minutes * 60_000;
  const session = (
    steps: [ms: number, type: StoredEvent['type'], pathname: string, extra?: Partial<StoredEvent>][],
    shared: Partial<StoredEvent> = {},
  ): StoredEvent[] => {
    const sessionId = uuidv7(steps[0]![0]);
    return steps.map(([ms, type, pathname, extra = {}]): StoredEvent => {
      const iso = new Date(ms).toISOString();
      return {
        ...template,
        referrer: '',
        querystring: '',
        identified_user_id: '',
        ...shared,
        timestamp: `${iso.slice(0, 10)} ${iso.slice(11, 23)}`,
        event_id: uuidv7(ms),
        session_id: sessionId,
        type,
        pathname,
        page_title: `Title ${pathname}`,
        event_name: type === 'pageview' ? '' : type === 'error' ? 'TypeError' : 'purchase',
        properties: type === 'custom_event' ? '{"plan":"pro"}' : '{}',
        props: type === 'custom_event' ? { plan: 'pro' } : {},
        ...extra,
      };
    });
  };
  const tie = '2026-03-12T10:00:00.000Z';
  return [
    // Across New York's midnight after the spring change, and across Berlin's on the change day.
    ...session([
      [at('2026-03-09T03:50:00Z'), 'pageview', '/blog'],
      [at('2026-03-09T04:10:00Z'), 'pageview', '/pricing'],
      [at('2026-03-09T04:12:00Z'), 'custom_event', '/pricing'],
      [at('2026-03-09T04:20:00Z'), 'pageview', '/signup'],
    ]),
    ...session([
      [at('2026-03-28T22:55:00Z'), 'pageview', '/docs'],
      [at('2026-03-29T00:30:00Z'), 'pageview', '/docs/api/events'],
    ]),
    // The repeated hour of New York's autumn change (01:30 EDT, then 01:30 EST), and its midnight.
    ...session([
      [at('2026-11-01T03:55:00Z'), 'pageview', '/'],
      [at('2026-11-01T05:30:00Z'), 'pageview', '/pricing'],
      [at('2026-11-01T06:30:00Z'), 'pageview', '/checkout/cart'],
    ]),
    ...session([[at('2026-10-24T23:30:00Z'), 'pageview', '/blog']]),
    // Across Kolkata's midnight starting 2026-03-20, and Adelaide's last DST day.
    ...session([
      [at('2026-03-19T18:20:00Z'), 'pageview', '/pricing'],
      [at('2026-03-19T18:40:00Z'), 'pageview', '/docs'],
    ]),
    ...session([
      [at('2026-04-04T13:10:00Z'), 'pageview', '/'],
      [at('2026-04-04T16:45:00Z'), 'pageview', '/blog'],
    ]),
    // No pageview at all: a custom event alone, an error alone.
    ...session([[at('2026-03-14T12:00:00Z'), 'custom_event', '/checkout/pay']]),
    ...session([[at('2026-03-14T12:05:00Z'), 'error', '/checkout/pay']]),
    // Errors inside a session never count as pageviews.
    ...session([
      [at('2026-03-15T09:00:00Z'), 'pageview', '/docs'],
      [at('2026-03-15T09:00:30Z'), 'error', '/docs'],
      [at('2026-03-15T09:01:00Z'), 'error', '/docs'],
    ]),
    // One visitor signing in partway, then again from a second device.
    ...session(
      [
        [at('2026-03-16T08:00:00Z'), 'pageview', '/login'],
        [at('2026-03-16T08:01:00Z'), 'pageview', '/account', { identified_user_id: 'member-42' }],
        [at('2026-03-16T08:02:00Z'), 'custom_event', '/account', { identified_user_id: 'member-42' }],
      ],
      { user_id: 'aaaaaaaaaaaaaaaa', country: 'NZ', browser: 'Firefox' },
    ),
    ...session(
      [
        [at('2026-03-17T20:00:00Z'), 'pageview', '/account', { identified_user_id: 'member-42' }],
        [at('2026-03-17T20:03:00Z'), 'outbound', '/account', { identified_user_id: 'member-42' }],
      ],
      { user_id: 'bbbbbbbbbbbbbbbb', country: 'NZ', device_type: 'mobile' },
    ),
    // A shared device: signed in as one member, days later as another (the later one is listed).
    ...session(
      [
        [at('2026-03-13T09:00:00Z'), 'pageview', '/login'],
        [at('2026-03-13T09:02:00Z'), 'pageview', '/account', { identified_user_id: 'member-7' }],
      ],
      { user_id: 'cccccccccccccccc' },
    ),
    ...session(
      [
        [at('2026-03-16T19:00:00Z'), 'pageview', '/account', { identified_user_id: 'member-8' }],
        [at('2026-03-16T19:05:00Z'), 'pageview', '/logout'],
      ],
      { user_id: 'cccccccccccccccc' },
    ),
    // Attributes that hold for nearly every whole session differ between this one's events (a
    // device type from the screen width, the place of an address as an updated database gives
    // it): a filter on them has to test each event, not the session's first.
    ...session(
      [
        [at('2026-03-21T10:00:00Z'), 'pageview', '/blog'],
        [
          at('2026-03-21T10:05:00Z'),
          'pageview',
          '/docs/moved',
          { country: 'AU', region: 'AU-NSW', device_type: 'tablet' },
        ],
        [at('2026-03-21T10:06:00Z'), 'custom_event', '/pricing'],
      ],
      { user_id: 'dddddddddddddddd', country: 'NZ', region: 'NZ-AUK', device_type: 'desktop' },
    ),
    // Three pageviews in one millisecond, then a click: time on page depends on event-id order.
    ...session([
      [at(tie), 'pageview', '/same-ms-a'],
      [at(tie), 'pageview', '/same-ms-b'],
      [at(tie), 'pageview', '/same-ms-c'],
      [at(tie, 2), 'outbound', '/same-ms-c'],
    ]),
    // One-pageview sessions whose values tie on count (ranked by byte order), with hostile text.
    ...[
      ['/tie/Z', 'Zed'],
      ['/tie/z', '=HYPERLINK("http://evil.example","x")'],
      ['/tie/é', '-2+3'],
      ['/tie/😀', '@SUM(A1)'],
      ['/tie/a', '\tindented, "quoted"\nand a second line'],
      ['/tie/b', '+1'],
    ].flatMap(([path, title], i) =>
      session([[at('2026-03-18T11:00:00Z', i * 40), 'pageview', path!, { page_title: title! }]], {
        referrer: `https://ref.example/${i},"q"`,
        channel: 'Referral',
        utm_source: i % 2 === 0 ? 'news,letter' : '',
      }),
    ),
  ];
}

/**
 * Events that arrive after the rest: each lands inside an existing session, some before its first
 * event (so entry pages and starts move).
 */
export function lateEvents(events: StoredEvent[], count: number): StoredEvent[] {
  const bySession = new Map<string, StoredEvent>();
  for (const e of events) if (!bySession.has(e.session_id)) bySession.set(e.session_id, e);
  return [...bySession.values()]
    .filter((_, i) => i % 7 === 3)
    .slice(0, count)
    .map((e, i) => {
      const ms = Date.parse(`${e.timestamp.replace(' ', 'T')}Z`) + (i % 2 === 0 ? -90_000 : 1_500);
      const iso = new Date(ms).toISOString();
      return {
        ...e,
        timestamp: `${iso.slice(0, 10)} ${iso.slice(11, 23)}`,
        event_id: uuidv7(ms),
        type: 'pageview',
        event_name: '',
        properties: '{}',
        props: {},
        pathname: '/late',
        page_title: 'Late',
      };
    });
}
