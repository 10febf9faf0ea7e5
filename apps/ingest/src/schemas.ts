import { isIP } from 'node:net';
import { z } from 'zod';

export const EVENT_TYPES = ['pageview', 'custom_event', 'outbound', 'error'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

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

/** Fields of one tracked event (SPEC section 6); unknown fields are rejected. */
const eventFields = {
  site_id: siteId,
  type: z.enum(EVENT_TYPES).default('pageview'),
  pathname: z.string().max(2048).optional(),
  hostname: z.string().max(253).optional(),
  page_title: z.string().max(512).optional(),
  querystring: z.string().max(2048).optional(),
  referrer: z.string().max(2048).optional(),
  user_agent: z.string().max(512).optional(),
  ip_address: ip.optional(),
  user_id: z.string().max(255).optional(),
  language: z.string().max(35).optional(),
  screenWidth: screen.optional(),
  screenHeight: screen.optional(),
  event_name: z.string().min(1).max(256).optional(),
  properties: z.string().max(8192).optional(),
  api_key: z.string().max(256).optional(),
};

function requireEventName(value: { type: EventType; event_name?: string | undefined }, ctx: z.RefinementCtx) {
  if ((value.type === 'custom_event' || value.type === 'error') && value.event_name === undefined) {
    ctx.addIssue({ code: 'custom', message: `event_name is required when type is ${value.type}`, path: [] });
  }
}

export const trackPayloadSchema = z.strictObject(eventFields).superRefine(requireEventName);
export type TrackPayload = z.infer<typeof trackPayloadSchema>;

/** A batch item may also carry its own timestamp and event id (client-side idempotency). */
export const batchItemSchema = z
  .strictObject({
    ...eventFields,
    timestamp: z.iso.datetime({ offset: true }).optional(),
    event_id: z.uuid().optional(),
  })
  .superRefine(requireEventName);
export type BatchItem = z.infer<typeof batchItemSchema>;

export const MAX_BATCH_EVENTS = 1000;
export const batchEnvelopeSchema = z.strictObject({
  events: z.array(z.unknown()).min(1).max(MAX_BATCH_EVENTS),
  api_key: z.string().max(256).optional(),
});
