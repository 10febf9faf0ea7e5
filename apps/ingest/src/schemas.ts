import { isIP } from 'node:net';
import { EVENT_TYPES, type EventType, WEB_VITALS } from '@trackhouse/clickhouse';
import { z } from 'zod';
import { MAX_USER_AGENT } from './request';

export { EVENT_TYPES, type EventType };

const siteId = z.union([
  z.number().int().positive().max(2_147_483_647),
  z
    .string()
    .regex(/^[1-9]\d{0,9}$/, 'must be a positive integer')
    .transform(Number)
    .pipe(z.number().max(2_147_483_647)),
]);

const ip = z.string().refine((v) => isIP(v) !== 0, 'must be a valid IPv4 or IPv6 address');
const screen = z.number().int().min(0).max(65535);

/**
 * Web vitals (docs/decisions.md): finite numbers, `null` when the browser measured nothing.
 * Times in milliseconds up to 10 minutes (a page slower than that measures the network, not
 * the page); CLS is a unitless score, 0..100.
 */
export const VITAL_MAX_MS = 600_000;
export const CLS_MAX = 100;
const vitalMs = z.number().min(0).max(VITAL_MAX_MS).nullable().optional();
const vitals = {
  lcp: vitalMs,
  cls: z.number().min(0).max(CLS_MAX).nullable().optional(),
  inp: vitalMs,
  fcp: vitalMs,
  ttfb: vitalMs,
};

/** Fields of one tracked event (SPEC section 6); unknown fields are rejected. */
const eventFields = {
  site_id: siteId,
  type: z.enum(EVENT_TYPES).default('pageview'),
  pathname: z.string().max(2048).optional(),
  hostname: z.string().max(253).optional(),
  page_title: z.string().max(512).optional(),
  querystring: z.string().max(2048).optional(),
  referrer: z.string().max(2048).optional(),
  user_agent: z.string().max(MAX_USER_AGENT).optional(),
  ip_address: ip.optional(),
  user_id: z.string().max(255).optional(),
  language: z.string().max(35).optional(),
  screenWidth: screen.optional(),
  screenHeight: screen.optional(),
  event_name: z.string().min(1).max(256).optional(),
  properties: z.string().max(8192).optional(),
  api_key: z.string().max(256).optional(),
  ...vitals,
};

type EventShape = { type: EventType; event_name?: string | undefined } & Partial<
  Record<(typeof WEB_VITALS)[number], number | null | undefined>
>;

/** Rules across fields: names where a type needs one, web vitals on performance events only. */
function checkEvent(value: EventShape, ctx: z.RefinementCtx) {
  if ((value.type === 'custom_event' || value.type === 'error') && value.event_name === undefined) {
    ctx.addIssue({ code: 'custom', message: `event_name is required when type is ${value.type}`, path: [] });
  }
  if (value.type === 'performance') return;
  for (const vital of WEB_VITALS) {
    if (value[vital] !== undefined) {
      ctx.addIssue({ code: 'custom', message: 'only allowed when type is performance', path: [vital] });
    }
  }
}

/**
 * A single event may carry a client-chosen `event_id` (UUID), so that a client retrying after a
 * lost answer stores the event once (the Node client sends one with every event).
 */
export const trackPayloadSchema = z
  .strictObject({ ...eventFields, event_id: z.uuid().optional() })
  .superRefine(checkEvent);
export type TrackPayload = z.infer<typeof trackPayloadSchema>;

/** A batch item may also carry its own timestamp and event id (client-side idempotency). */
export const batchItemSchema = z
  .strictObject({
    ...eventFields,
    timestamp: z.iso.datetime({ offset: true }).optional(),
    event_id: z.uuid().optional(),
  })
  .superRefine(checkEvent);
export type BatchItem = z.infer<typeof batchItemSchema>;

export const MAX_BATCH_EVENTS = 1000;
export const batchEnvelopeSchema = z.strictObject({
  events: z.array(z.unknown()).min(1).max(MAX_BATCH_EVENTS),
  api_key: z.string().max(256).optional(),
});

/**
 * POST /api/identify, as the browser client sends it (`site_id`, `user_id`, `traits`,
 * `is_new_identify`), plus what server senders may add as for events. Traits: a JSON object of
 * at most 2 KiB as JSON, as the reference product accepts.
 */
export const MAX_TRAITS_BYTES = 2048;
export const identifyPayloadSchema = z.strictObject({
  site_id: siteId,
  user_id: z
    .string()
    .max(255)
    .refine((v) => v.trim() !== '', 'must not be blank'),
  traits: z
    .record(z.string(), z.unknown())
    .refine(
      (t) => Buffer.byteLength(JSON.stringify(t)) <= MAX_TRAITS_BYTES,
      `at most ${MAX_TRAITS_BYTES} bytes as JSON`,
    )
    .optional(),
  is_new_identify: z.boolean().default(true),
  ip_address: ip.optional(),
  user_agent: z.string().max(MAX_USER_AGENT).optional(),
  api_key: z.string().max(256).optional(),
});
export type IdentifyPayload = z.infer<typeof identifyPayloadSchema>;

/** rrweb timestamps are stored as DateTime64: before 2100, as every real clock is. */
const MAX_REPLAY_TIME_MS = Date.UTC(2100, 0, 1);
export const MAX_REPLAY_EVENTS = 10_000;

/**
 * A session replay batch as the browser client posts it: `{userId, events, metadata}`. The
 * rrweb events are kept as sent (any fields); each needs a numeric type and timestamp.
 */
export const replayBatchSchema = z.strictObject({
  userId: z.string().max(255).optional(),
  events: z
    .array(
      z.looseObject({
        type: z.number().int().min(0).max(255),
        timestamp: z.number().min(0).max(MAX_REPLAY_TIME_MS),
        data: z.unknown(),
      }),
    )
    .min(1)
    .max(MAX_REPLAY_EVENTS),
  metadata: z
    .looseObject({
      pageUrl: z.string().max(2048).optional(),
      viewportWidth: screen.optional(),
      viewportHeight: screen.optional(),
      language: z.string().max(35).optional(),
    })
    .optional(),
});
export type ReplayBatch = z.infer<typeof replayBatchSchema>;
