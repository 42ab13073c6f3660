// The one place errors become HTTP. Every body carries `detail`: an array of {loc, msg} on 422, a string
// elsewhere. A 500 never shows internals: it is logged with the request id, which the answer also carries.
import type { ErrorRequestHandler } from 'express';
import { AppError, ValidationError, type ErrorKind } from '../errors.js';
import type { Logger } from '../logging.js';

export const statusByKind: Record<ErrorKind, number> = {
  invalid_argument: 400,
  unauthenticated: 401,
  permission_denied: 403,
  not_found: 404,
  conflict: 409,
  // A conditional write that finds its condition false: S3's answer to `If-None-Match: *` on a key that exists.
  precondition_failed: 412,
  payload_too_large: 413,
  unsupported_media_type: 415,
  unprocessable: 422,
  rate_limited: 429,
  internal: 500,
  upstream_failed: 502,
  // SPEC.md: 500 is "service bug or dependency"; a dependency that did not answer is the second kind.
  unavailable: 500,
  upstream_timeout: 504,
};

export interface ErrorBody {
  detail: string | { loc: (string | number)[]; msg: string }[];
  code: string;
  request_id?: string;
  [extra: string]: unknown;
}

/**
 * The status and body an error answers with; also used by the stream writer for `error` frames. Every body has
 * the same shape: `detail`, a stable `code`, and the `request_id` of the log lines about it.
 */
export function describeError(error: unknown, requestId?: string): { status: number; body: ErrorBody } {
  const { status, body } = statusAndBody(error);
  return { status, body: { ...body, ...(requestId ? { request_id: requestId } : {}) } };
}

function statusAndBody(error: unknown): { status: number; body: ErrorBody } {
  if (error instanceof ValidationError) {
    return { status: 422, body: { detail: error.problems, code: 'validation_failed' } };
  }
  if (error instanceof AppError && error.kind === 'unprocessable') {
    // SPEC.md: a 422's detail is always a list of {loc, msg}, even when the problem has no single field.
    return { status: 422, body: { ...error.extra, detail: [{ loc: [], msg: error.message }], code: error.code ?? 'unprocessable' } };
  }
  if (error instanceof AppError) {
    const status = statusByKind[error.kind];
    const detail = status >= 500 && error.kind === 'internal' ? 'internal server error' : error.message;
    return { status, body: { ...error.extra, detail, code: error.code ?? error.kind } };
  }
  const bodyParser = bodyParserError(error);
  if (bodyParser) return bodyParser;
  // The router decodes path parameters before any route runs; `%zz` or a cut-off UTF-8 sequence cannot be decoded.
  if (error instanceof URIError) return { status: 400, body: { detail: 'the request path is not valid percent-encoding', code: 'invalid_path' } };
  return { status: 500, body: { detail: 'internal server error', code: 'internal' } };
}

/** What a stream's terminal `error` frame says: the status, code and message a request would get, and whether a retry can help. */
export function describeErrorFrame(error: unknown): { status: number; code: string; message: string; retryable: boolean } {
  const { status, body } = describeError(error);
  return {
    status,
    code: body.code,
    message: typeof body.detail === 'string' ? body.detail : body.detail.map((problem) => problem.msg).join('; '),
    retryable: error instanceof AppError ? error.isRetryable : true,
  };
}

/** The error kind that answers with `status`, for an error frame read back into an error (500: `unavailable`, whose message is shown). */
export function kindOfStatus(status: number): ErrorKind {
  const kind = (Object.keys(statusByKind) as ErrorKind[]).find((candidate) => statusByKind[candidate] === status && candidate !== 'internal');
  return kind ?? 'unavailable';
}

/**
 * JSON.parse reviver that refuses `__proto__` keys anywhere in a body (as fastify does by default): copied into
 * a plain object they would replace its prototype, and validators silently drop them.
 */
export function refuseProtoKeys(key: string, value: unknown): unknown {
  if (key === '__proto__') throw new ProtoKeyError();
  return value;
}

class ProtoKeyError extends Error {
  constructor() {
    super('request body may not contain the key __proto__');
    this.name = 'ProtoKeyError';
  }
}

/** Errors raised by express.json() carry a `type`; map them to the statuses SPEC.md names. */
function bodyParserError(error: unknown): { status: number; body: ErrorBody } | null {
  if (typeof error !== 'object' || error === null || !('type' in error)) return null;
  if (error instanceof ProtoKeyError) return { status: 400, body: { detail: error.message, code: 'invalid_json' } };
  switch ((error as { type: unknown }).type) {
    case 'entity.parse.failed':
      return { status: 400, body: { detail: 'request body is not valid JSON', code: 'invalid_json' } };
    case 'entity.too.large': {
      const limit = (error as { limit?: number }).limit;
      return { status: 413, body: { detail: `request body is larger than the limit of ${limit ?? 'the configured'} bytes`, code: 'payload_too_large' } };
    }
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return { status: 415, body: { detail: 'unsupported request body encoding', code: 'unsupported_media_type' } };
    case 'request.aborted':
      return { status: 400, body: { detail: 'request body was aborted by the client', code: 'request_aborted' } };
    default: {
      // Other body-parser refusals (size header mismatch, bad encoding) are the client's, and say so safely.
      const { status, expose, message } = error as { status?: unknown; expose?: unknown; message?: unknown };
      if (typeof status === 'number' && status >= 400 && status < 500 && expose === true && typeof message === 'string') {
        return { status, body: { detail: message, code: 'invalid_request' } };
      }
      return null;
    }
  }
}

export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (error, req, res, _next) => {
    const requestId = res.locals.requestId as string | undefined;
    const { status, body } = describeError(error, requestId);
    if (status >= 500) {
      // The route's pattern, not the path: a path may carry a credential (a trigger's URL is one).
      const route = req.route?.path === undefined ? 'unmatched' : `${req.baseUrl}${String(req.route.path)}`;
      logger.error({ err: error, request_id: requestId, method: req.method, route }, 'request failed');
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    if (status === 429) res.setHeader('Retry-After', String(retryAfterSeconds(error)));
    res.status(status).json(body);
  };
}

/** Whole seconds until a refused caller may try again (RFC 9110 `Retry-After`); at least 1. */
export function retryAfterSeconds(error: unknown, now = Date.now()): number {
  const at = error instanceof AppError ? error.retryAt : undefined;
  return at ? Math.max(1, Math.ceil((at.getTime() - now) / 1000)) : 1;
}
