import type { ContentfulStatusCode } from 'hono/utils/http-status';

/** Every machine code the API answers with, mapped to its HTTP status. */
export const ERROR_STATUS = {
  INVALID_JSON: 400,
  INVALID_PAYLOAD: 400,
  INVALID_PROPERTIES: 400,
  INVALID_PARAMS: 400,
  NO_FIELDS: 400,
  MISSING_API_KEY: 401,
  INVALID_API_KEY: 401,
  ACCESS_DENIED: 403,
  FORBIDDEN_ROLE: 403,
  BOT_DETECTED: 403,
  DOMAIN_MISMATCH: 403,
  NOT_FOUND: 404,
  SITE_NOT_FOUND: 404,
  GOAL_NOT_FOUND: 404,
  FUNNEL_NOT_FOUND: 404,
  ORGANIZATION_NOT_FOUND: 404,
  API_KEY_NOT_FOUND: 404,
  TOO_MANY_API_KEYS: 409,
  SESSION_NOT_FOUND: 404,
  USER_NOT_FOUND: 404,
  PAYLOAD_TOO_LARGE: 413,
  RATE_LIMITED: 429,
  OVER_MONTHLY_LIMIT: 429,
  INTERNAL_ERROR: 500,
  OVERLOADED: 503,
  NOT_READY: 503,
  /** A read ran past CLICKHOUSE_READ_TIMEOUT_S (or was estimated to). */
  QUERY_TIMEOUT: 503,
  /** A read needed more than CLICKHOUSE_READ_MAX_MEMORY_MB. */
  QUERY_TOO_LARGE: 503,
} as const satisfies Record<string, ContentfulStatusCode>;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ValidationDetails {
  fieldErrors: Record<string, string[]>;
  formErrors: string[];
}

export interface ErrorBody {
  success: false;
  error: string;
  code: ErrorCode;
  details?: Record<string, unknown>;
}

/** The one error type routes throw; `onError` turns it into the spec's error body. */
export class ApiError extends Error {
  readonly status: ContentfulStatusCode;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    /** Extra response headers, e.g. Retry-After on 429/503. */
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'ApiError';
    this.status = ERROR_STATUS[code];
  }

  toBody(): ErrorBody {
    const body: ErrorBody = { success: false, error: this.message, code: this.code };
    if (this.details) body.details = this.details;
    return body;
  }
}

/** Flattens zod issues into the `{fieldErrors, formErrors}` shape of the spec. */
export function flattenIssues(
  issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>,
): ValidationDetails {
  const fieldErrors: Record<string, string[]> = {};
  const formErrors: string[] = [];
  for (const issue of issues) {
    const key = issue.path[0];
    if (key === undefined) {
      formErrors.push(issue.message);
      continue;
    }
    const name = String(key);
    fieldErrors[name] ??= [];
    fieldErrors[name].push(issue.message);
  }
  return { fieldErrors, formErrors };
}

export function validationError(
  code: 'INVALID_PAYLOAD' | 'INVALID_PARAMS',
  message: string,
  issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>,
): ApiError {
  return new ApiError(code, message, { ...flattenIssues(issues) });
}

/** "10 minutes", "1 hour", "30 seconds": a window named in its largest whole unit. */
export function describeWindow(seconds: number): string {
  const unit = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;
  if (seconds % 3600 === 0) return unit(seconds / 3600, 'hour');
  if (seconds % 60 === 0) return unit(seconds / 60, 'minute');
  return unit(seconds, 'second');
}

/** The 429 message of a limit (SPEC section 5), per API key unless another subject is named. */
export function rateLimitMessage(max: number, windowSeconds: number, per = 'API key'): string {
  return `Rate limit exceeded. Maximum ${max} requests per ${describeWindow(windowSeconds)} per ${per}.`;
}
