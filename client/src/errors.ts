// The client's one error family (SPEC.md Errors): what the service answered, by status, with the fields of its error
// body, and whether the call may be tried again. A stream's failure is a StreamError that also says whether the
// server ended the run's stream (`terminal`) or the connection stopped.

/** The JSON body every error answer of both planes carries. */
export interface ErrorBody {
  detail?: unknown;
  code?: string;
  request_id?: string;
  [field: string]: unknown;
}

/** Codes no retry helps: a missing provider, a spend cap (SPEC.md Errors 2, 3). */
const NEVER_RETRIED = new Set(['no_provider', 'budget_exceeded']);
const RETRIED_STATUSES = new Set([429, 500, 502, 503, 504]);

/** Whether the service's answer is worth another try (SPEC.md Errors: 429 and 5xx, never `no_provider`). */
export function isRetryable(status: number | undefined, code: string | undefined): boolean {
  if (code !== undefined && NEVER_RETRIED.has(code)) return false;
  return status !== undefined && RETRIED_STATUSES.has(status);
}

export interface AgentplaneErrorFields {
  status?: number | undefined;
  code?: string | undefined;
  detail?: unknown;
  request_id?: string | undefined;
  retryable?: boolean | undefined;
  body?: ErrorBody | undefined;
  cause?: unknown;
}

export class AgentplaneError extends Error {
  /** The HTTP status (of the answer, or of a stream's `error` frame); undefined when no answer came. */
  readonly status: number | undefined;
  /** The service's machine-readable reason (`not_found`, `no_provider`, `rate_limited`, ...). */
  readonly code: string | undefined;
  /** The body's `detail`: a sentence, or on 422 a list of `{loc, msg}`. */
  readonly detail: unknown;
  /** The request's id in the service's logs (also its X-Request-Id header). */
  readonly request_id: string | undefined;
  /** Whether trying again may succeed. */
  readonly retryable: boolean;
  /** The whole error body as the service sent it. */
  readonly body: ErrorBody | undefined;

  constructor(message: string, fields: AgentplaneErrorFields = {}) {
    super(message, fields.cause === undefined ? undefined : { cause: fields.cause });
    this.name = new.target.name;
    this.status = fields.status;
    this.code = fields.code;
    this.detail = fields.detail;
    this.request_id = fields.request_id;
    this.retryable = fields.retryable ?? isRetryable(fields.status, fields.code);
    this.body = fields.body;
  }
}

export class BadRequestError extends AgentplaneError {}
export class AuthenticationError extends AgentplaneError {}
export class PermissionDeniedError extends AgentplaneError {}
export class NotFoundError extends AgentplaneError {}
export class ConflictError extends AgentplaneError {}
export class UnprocessableEntityError extends AgentplaneError {}
export class RateLimitError extends AgentplaneError {}
export class InternalServerError extends AgentplaneError {}

/** No answer came: the connection failed. The request may or may not have reached the service. */
export class ConnectionError extends AgentplaneError {
  constructor(message: string, cause?: unknown) {
    super(message, { cause, retryable: true });
  }
}

/** No answer came within the client's timeout. */
export class TimeoutError extends ConnectionError {}

export interface StreamErrorFields extends AgentplaneErrorFields {
  terminal: boolean;
  run_id?: string | null | undefined;
  session_id?: string | null | undefined;
}

/**
 * A chat stream that failed (SPEC.md Errors 9). `terminal` is true when the server sent an `error` frame and ended the
 * stream (nothing to reconnect to); false when the stream stopped and reconnecting did not bring it back.
 */
export class StreamError extends AgentplaneError {
  readonly terminal: boolean;
  readonly run_id: string | null;
  readonly session_id: string | null;

  constructor(message: string, fields: StreamErrorFields) {
    super(message, fields);
    this.terminal = fields.terminal;
    this.run_id = fields.run_id ?? null;
    this.session_id = fields.session_id ?? null;
  }
}

const CLASS_BY_STATUS: Record<number, new (message: string, fields: AgentplaneErrorFields) => AgentplaneError> = {
  400: BadRequestError,
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  422: UnprocessableEntityError,
  429: RateLimitError,
};

/** The error a status and body make, of the class the status names. */
export function errorFor(status: number, body: ErrorBody | undefined, requestId?: string | null): AgentplaneError {
  const Class = CLASS_BY_STATUS[status] ?? (status >= 500 ? InternalServerError : AgentplaneError);
  const detail = body?.detail;
  const message = typeof detail === 'string' ? detail : detail === undefined ? `HTTP ${status}` : JSON.stringify(detail);
  return new Class(message, { status, code: body?.code, detail, request_id: body?.request_id ?? requestId ?? undefined, body });
}

/** The error a failed answer makes; reads (and so consumes) its body. */
export async function errorFromResponse(response: Response): Promise<AgentplaneError> {
  const text = await response.text().catch(() => '');
  let body: ErrorBody | undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    body = parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as ErrorBody) : { detail: parsed };
  } catch {
    body = text === '' ? undefined : { detail: text };
  }
  return errorFor(response.status, body, response.headers.get('x-request-id'));
}
