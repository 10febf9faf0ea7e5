/** One row of the events table, as inserted (JSONEachRow): what ingest stores and the seed generates. */
export interface StoredEvent {
  site_id: number;
  timestamp: string;
  event_id: string;
  type: 'pageview' | 'custom_event' | 'outbound' | 'error';
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
 * use, errors left out.
 */
export type EventRecord = Omit<
  StoredEvent,
  'site_id' | 'type' | 'props' | 'utm_source' | 'utm_medium' | 'utm_campaign' | 'utm_term' | 'utm_content'
> & { type: Exclude<StoredEvent['type'], 'error'> };
