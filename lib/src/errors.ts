// The small typed error family every service throws. It is mapped to HTTP in exactly one place
// (lib/src/http/errors.ts); services never pick status codes themselves.

export type ErrorKind =
  | 'invalid_argument'
  | 'unauthenticated'
  | 'permission_denied'
  | 'not_found'
  | 'conflict'
  | 'precondition_failed'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'unprocessable'
  | 'rate_limited'
  | 'upstream_failed'
  | 'upstream_timeout'
  | 'unavailable'
  | 'internal';

/** One field-level problem of a 422 answer: where (`loc`, a path into the request) and what (`msg`). */
export interface FieldProblem {
  loc: (string | number)[];
  msg: string;
}

export interface AppErrorOptions {
  /** A stable machine-readable code (`no_provider`, `budget_exceeded`, ...) carried next to `detail`. */
  code?: string;
  /** Extra fields a client relies on (for example `run_id`, `session_id`). */
  extra?: Record<string, unknown>;
  /** When trying again can succeed (a rate limit's reset): answered as `Retry-After`. */
  retryAt?: Date;
  cause?: unknown;
}

export class AppError extends Error {
  readonly kind: ErrorKind;
  readonly code: string | undefined;
  readonly extra: Record<string, unknown> | undefined;
  readonly retryAt: Date | undefined;

  constructor(kind: ErrorKind, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.kind = kind;
    this.code = options.code;
    this.extra = options.extra;
    this.retryAt = options.retryAt;
  }

  /** Whether a caller may retry the same request later (rate limits, upstream failures, timeouts). */
  get isRetryable(): boolean {
    return ['rate_limited', 'upstream_failed', 'upstream_timeout', 'unavailable', 'internal'].includes(this.kind);
  }
}

/** What went wrong, as text: an Error's message, or anything else thrown, stringified. */
export const errorMessage = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** 422: the body or query failed its schema. `problems` becomes the `detail` array. */
export class ValidationError extends AppError {
  readonly problems: FieldProblem[];

  constructor(problems: FieldProblem[]) {
    super('unprocessable', problems.map((p) => `${p.loc.join('.')}: ${p.msg}`).join('; '));
    this.name = 'ValidationError';
    this.problems = problems;
  }
}

export const invalidArgument = (message: string, options?: AppErrorOptions) =>
  new AppError('invalid_argument', message, options);
export const unauthenticated = (message: string, options?: AppErrorOptions) =>
  new AppError('unauthenticated', message, options);
export const permissionDenied = (message: string, options?: AppErrorOptions) =>
  new AppError('permission_denied', message, options);
export const notFound = (message: string, options?: AppErrorOptions) => new AppError('not_found', message, options);
export const conflict = (message: string, options?: AppErrorOptions) => new AppError('conflict', message, options);
export const unavailable = (message: string, options?: AppErrorOptions) =>
  new AppError('unavailable', message, options);
export const internal = (message: string, options?: AppErrorOptions) => new AppError('internal', message, options);
