/** Every event type stored in the events table. */
export const EVENT_TYPES = [
  'pageview',
  'custom_event',
  'outbound',
  'error',
  'performance',
  'button_click',
  'copy',
  'form_submit',
  'input_change',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** The web-vital columns of `performance` events (NULL elsewhere). */
export const WEB_VITALS = ['lcp', 'cls', 'inp', 'fcp', 'ttfb'] as const;
export type WebVital = (typeof WEB_VITALS)[number];

/** One row of the events table, as inserted (JSONEachRow): what ingest stores and the seed generates. */
export interface StoredEvent extends Partial<Record<WebVital, number | null>> {
  site_id: number;
  timestamp: string;
  event_id: string;
  type: EventType;
  event_name: string;
  properties: string;
  props: Record<string, string>;
  session_id: string;
  user_id: string;
  identified_user_id: string;
  pathname: string;
  querystring: string;
  hostname: string;
  page_title: string;
  referrer: string;
  channel: string;
  utm_source: string;
  utm_medium: string;
  utm_campaign: string;
  utm_term: string;
  utm_content: string;
  browser: string;
  browser_version: string;
  operating_system: string;
  operating_system_version: string;
  device_type: string;
  language: string;
  country: string;
  region: string;
  city: string;
  lat: number;
  lon: number;
  screen_width: number;
  screen_height: number;
}

/**
 * An event as the events list answers it: the stored row without the columns kept for internal
 * use; pageviews, custom events and outbound clicks only.
 */
export type EventRecord = Omit<
  StoredEvent,
  | 'site_id'
  | 'type'
  | 'props'
  | 'utm_source'
  | 'utm_medium'
  | 'utm_campaign'
  | 'utm_term'
  | 'utm_content'
  | WebVital
> & { type: 'pageview' | 'custom_event' | 'outbound' };
