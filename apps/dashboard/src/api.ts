import type { ApiErrorBody, Filter } from './types';

const KEY = 'trackhouse.apiKey';
const privateKeys = new Map<number, string>();

/** The signed-in API key lives in localStorage only: never in a URL, never logged. */
export const apiKey = {
  get: (): string | null => localStorage.getItem(KEY),
  set: (key: string) => localStorage.setItem(KEY, key),
  clear: () => localStorage.removeItem(KEY),
};

/** A private link key for a site, taken out of the address bar and kept for this tab. */
export function rememberPrivateKey(siteId: number, key: string): void {
  privateKeys.set(siteId, key);
  sessionStorage.setItem(`trackhouse.privateKey.${siteId}`, key);
}

/** Whether this tab came with a private link for the site (its key may since have been revoked). */
export const hasPrivateKey = (siteId: number): boolean => privateKey(siteId) !== null;

function privateKey(siteId: number | undefined): string | null {
  if (siteId === undefined) return null;
  return privateKeys.get(siteId) ?? sessionStorage.getItem(`trackhouse.privateKey.${siteId}`);
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** The API's message, with the fields a validation error names ("Invalid payload — name: …"). */
function errorText(body: ApiErrorBody | undefined, status: number): string {
  if (!body?.error) return `HTTP ${status}`;
  const details = body.details as
    | { fieldErrors?: Record<string, string[]>; formErrors?: string[] }
    | undefined;
  const parts = [
    ...Object.entries(details?.fieldErrors ?? {}).map(([field, msgs]) => `${field}: ${msgs.join(', ')}`),
    ...(details?.formErrors ?? []),
  ];
  return parts.length ? `${body.error} — ${parts.join('; ')}` : body.error;
}

export interface Query {
  start: string;
  end: string;
  timeZone: string;
  filters: Filter[];
}

/** Query parameters of SPEC section 8 (dates, time zone, filters) plus an endpoint's own. */
export function params(
  q: Query | undefined,
  extra: Record<string, string | number | undefined> = {},
): string {
  const p = new URLSearchParams();
  if (q) {
    p.set('start_date', q.start);
    p.set('end_date', q.end);
    p.set('time_zone', q.timeZone);
    if (q.filters.length) p.set('filters', JSON.stringify(q.filters));
  }
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) p.set(k, String(v));
  const text = p.toString();
  return text ? `?${text}` : '';
}

function headers(siteId?: number): Record<string, string> {
  const h: Record<string, string> = {};
  const key = apiKey.get();
  if (key) h.authorization = `Bearer ${key}`;
  const link = privateKey(siteId);
  if (link) h['x-private-key'] = link;
  return h;
}

export async function request(path: string, siteId?: number, init: RequestInit = {}): Promise<Response> {
  const res = await fetch(path, { ...init, headers: { ...headers(siteId), ...init.headers } });
  if (!res.ok) {
    const body = (await res.json().catch(() => undefined)) as ApiErrorBody | undefined;
    throw new ApiError(res.status, body?.code ?? 'HTTP_ERROR', errorText(body, res.status));
  }
  return res;
}

/** A change through the API (signed-in key only): JSON in, JSON out. */
export async function send<T>(method: 'POST' | 'PUT' | 'DELETE', path: string, body?: unknown): Promise<T> {
  const init: RequestInit = { method };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers = { 'content-type': 'application/json' };
  }
  return (await (await request(path, undefined, init)).json()) as T;
}

export async function get<T>(path: string, siteId?: number): Promise<T> {
  return (await (await request(path, siteId)).json()) as T;
}
