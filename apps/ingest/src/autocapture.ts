import { ApiError } from '@trackhouse/core';
import type { EventType } from './schemas';

/** Events the browser client captures by itself from clicks, copies and forms. */
const AUTOCAPTURE: ReadonlySet<EventType> = new Set(['button_click', 'copy', 'form_submit', 'input_change']);

/**
 * Bounds of autocaptured properties (docs/decisions.md). The client sends flat objects of short
 * strings and numbers (element texts cut at 100 or 500 characters, form ids, field counts, the
 * element's `data-rybbit-prop-*` attributes); these bounds leave room for all of it and keep a
 * page's markup from filling the events table.
 */
export const AUTOCAPTURE_LIMITS = { keys: 50, keyLength: 128, valueLength: 1024 } as const;

function invalid(message: string): ApiError {
  return new ApiError('INVALID_PROPERTIES', 'Invalid properties', {
    fieldErrors: { properties: [message] },
    formErrors: [],
  });
}

/** Autocapture properties must be a flat object of strings, finite numbers, booleans or null. */
export function checkAutocaptureProperties(type: EventType, properties: Record<string, unknown>): void {
  if (!AUTOCAPTURE.has(type)) return;
  const entries = Object.entries(properties);
  if (entries.length > AUTOCAPTURE_LIMITS.keys) {
    throw invalid(`at most ${AUTOCAPTURE_LIMITS.keys} keys for ${type}`);
  }
  for (const [key, value] of entries) {
    if (key.length === 0 || key.length > AUTOCAPTURE_LIMITS.keyLength) {
      throw invalid(`keys must be 1..${AUTOCAPTURE_LIMITS.keyLength} characters`);
    }
    if (typeof value === 'string') {
      if (value.length > AUTOCAPTURE_LIMITS.valueLength) {
        throw invalid(`${key}: at most ${AUTOCAPTURE_LIMITS.valueLength} characters`);
      }
    } else if (value !== null && typeof value !== 'number' && typeof value !== 'boolean') {
      throw invalid(`${key}: must be a string, number, boolean or null`);
    }
  }
}
