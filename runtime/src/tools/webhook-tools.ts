// Webhook tools (SPEC.md Tools, Outbound deliveries; docs/decisions/0052): HTTPS endpoints a project publishes,
// which the agent calls for the person whose turn it is. The call body names the tool, the model's arguments and
// who it is for (subject, scope and roles from the verified token, so the handler can trust them; the arguments are
// model text it must check), signed under the tool's own secret, and under the replaced one too while a rotation's
// 24 hours last. The handler is reached through the SSRF guard, never redirected, within a time limit; a call is
// repeated only when the handler cannot have acted on it (refused connection, 429 or 503). Whatever comes back,
// an error status included, is the tool's result for the model, cut to 20,000 characters; every call is recorded
// (its record goes back with the result, and is written with it).
import { randomUUID } from 'node:crypto';
import { AppError } from '@agentplane/lib/errors';
import { signatureHeader } from '@agentplane/lib/crypto/signatures';
import { storableText } from '@agentplane/lib/http/text';
import { readUpTo } from '@agentplane/lib/net/capped';
import type { GuardedFetch } from '@agentplane/lib/net/guarded-fetch';
import type { Principal } from '../auth/authenticate.js';
import type { ServerCallContext, ServerTool } from '../chat/tools.js';
import type { WebhookToolSection } from '../tenants/schemas.js';
import type { DeliveryRecord } from '../chat/turn-records.js';
import { DELIVERY_EXCERPT_CHARS } from './deliveries.js';

/** SPEC.md Limits: what is kept of a handler's answer as the tool result. */
export const MAX_WEBHOOK_RESULT_CHARS = 20_000;
/** What is read of a handler's answer at most (4 bytes a character, so a cut never falls short of the limit). */
const MAX_RESPONSE_BYTES = MAX_WEBHOOK_RESULT_CHARS * 4;
/** Attempts per call, when the handler cannot have acted on the earlier ones. */
const MAX_ATTEMPTS = 3;
/** The longest wait a handler's Retry-After may ask for before a repeat. */
const MAX_RETRY_AFTER_MS = 5_000;
/** Connection errors that mean nothing reached the handler. */
const NOT_SENT = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH']);
/** Statuses by which a handler says it did not act and may be asked again. */
const TRY_AGAIN = new Set([429, 503]);

export const SIGNATURE_HEADER = 'X-Service-Signature';
/** The same on every attempt of one call, so a handler can tell a repeat from a new call. */
export const DELIVERY_HEADER = 'X-Agentplane-Delivery';

export interface WebhookToolsOptions {
  /** Guarded fetch with the webhook time limit. */
  fetch: GuardedFetch;
  /**
   * The most one attempt may take in all, its answer read to the end: a handler that trickles bytes cannot hold a
   * turn past it (the fetch's own limit is on silence).
   */
  attemptMs: number;
  /** The wait before a repeat, when the handler names none. */
  retryDelayMs?: number;
  now?: () => number;
}

type CallOutcome = ({ ok: true; text: string } | { ok: false; message: string }) & { delivery?: DeliveryRecord };

export class WebhookTools {
  constructor(private readonly options: WebhookToolsOptions) {}

  /** The project's webhook tools as server tools for this caller's turns, each offered under `webhook_tools`. */
  for(principal: Principal): ServerTool[] {
    return (principal.configuration.document.webhook_tools ?? []).map((tool) => ({
      needs: ['webhook_tools'] as const,
      origin: 'webhook' as const,
      requiresApproval: tool.requires_approval,
      definition: { name: tool.name, description: tool.description, parameters: tool.parameters },
      run: (args, signal, context) => this.call(tool, principal, args, signal, context),
    }));
  }

  /** One call of a tool: signed, sent (and repeated where safe), its answer made the result and recorded. */
  async call(tool: WebhookToolSection, principal: Principal, args: Record<string, unknown>, signal: AbortSignal, context: ServerCallContext): Promise<CallOutcome> {
    const now = this.options.now ?? Date.now;
    const started = performance.now();
    const { claims } = principal;
    const body = JSON.stringify({
      tool: tool.name,
      arguments: args,
      subject: claims.sub,
      scope: claims.scope,
      roles: claims.roles,
      tenant_id: principal.tenantId,
      session_id: context.sessionId,
    });
    // The replaced secret signs too until its rotation's overlap ends.
    const secrets = tool.secrets.filter((held) => held.until === undefined || Date.parse(held.until) > now()).map((held) => held.secret);
    const headers = {
      'content-type': 'application/json',
      'user-agent': 'agentplane-webhook-tools',
      [SIGNATURE_HEADER]: signatureHeader(secrets, body),
      [DELIVERY_HEADER]: randomUUID(),
    };
    let attempts = 0;
    let status: number | null = null;
    let outcome: CallOutcome;
    let error: string | null = null;
    let deadline: AbortSignal | undefined;
    for (;;) {
      attempts += 1;
      try {
        deadline = AbortSignal.timeout(this.options.attemptMs);
        const attempt = AbortSignal.any([signal, deadline]);
        const response = await this.options.fetch(tool.url, { method: 'POST', headers, body, signal: attempt, redirect: 'manual' });
        status = response.status;
        if (TRY_AGAIN.has(status) && attempts < MAX_ATTEMPTS) {
          await response.body?.cancel();
          await this.pause(retryAfterMs(response.headers.get('retry-after')), signal);
          continue;
        }
        const text = (await readUpTo(response, MAX_RESPONSE_BYTES)).text.slice(0, MAX_WEBHOOK_RESULT_CHARS);
        if (status >= 200 && status < 300) {
          outcome = { ok: true, text: text === '' ? `(the handler answered ${status} with no body)` : text };
        } else {
          error = `the handler answered HTTP ${status}`;
          outcome = { ok: false, message: `The handler answered HTTP ${status}${text === '' ? '' : `: ${text}`}`.slice(0, MAX_WEBHOOK_RESULT_CHARS) };
        }
      } catch (caught) {
        if (signal.aborted) throw signal.reason;
        // The attempt's own deadline, however the fetch or the body's read reported it.
        const failure = deadline?.aborted ? new AppError('upstream_timeout', `the handler did not answer within ${this.options.attemptMs} ms`) : caught;
        if (notSent(failure) && attempts < MAX_ATTEMPTS) {
          await this.pause(undefined, signal);
          continue;
        }
        error = failure instanceof AppError ? failure.message : 'the handler could not be reached';
        outcome = { ok: false, message: `The handler could not be reached: ${error}` };
      }
      break;
    }
    // The record goes with the call's answer, in the statement that writes it (runtime/src/chat/turn-records.ts).
    const delivery: DeliveryRecord = {
      toolId: tool.id,
      tool: tool.name,
      subject: claims.sub,
      status,
      ok: outcome.ok,
      attempts,
      durationMs: performance.now() - started,
      resultExcerpt: storableText((outcome.ok ? outcome.text : outcome.message).slice(0, DELIVERY_EXCERPT_CHARS)),
      error: error === null ? null : storableText(error.slice(0, DELIVERY_EXCERPT_CHARS)),
    };
    return { ...outcome, delivery };
  }

  private pause(ms: number | undefined, signal: AbortSignal): Promise<void> {
    const wait = ms ?? this.options.retryDelayMs ?? 250;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      }, wait);
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/** Nothing of the call reached the handler: the connection was refused or had no route. */
function notSent(failure: unknown): boolean {
  const cause = failure instanceof Error ? (failure.cause as { code?: unknown } | undefined) : undefined;
  return typeof cause?.code === 'string' && NOT_SENT.has(cause.code);
}

/** A Retry-After in seconds, capped; undefined for none or a date (the default wait then applies). */
function retryAfterMs(header: string | null): number | undefined {
  if (header === null || !/^\d{1,6}$/.test(header.trim())) return undefined;
  return Math.min(MAX_RETRY_AFTER_MS, Number(header.trim()) * 1000);
}
