// A new conversation's first model call, sent while its turn is stored (docs/decisions/0050): the start statement
// and the provider's first answer overlap instead of following each other. The run takes the call over at launch,
// or it is dropped here.
import type { ModelFactory } from '../../models/port.js';
import type { UsageLimiter } from '../limits.js';
import { runLogKey } from '../runs.js';
import type { Frame } from '../schemas.js';
import { callModel, planned, promptOf, resumed } from './model-call.js';
import type { EarlyCall, EarlyTurn, RunLog } from './turn.js';

/**
 * Sends a turn's first model call before the turn is stored, for a prompt known without the store: a new
 * conversation's first step, which sees the system prompt and the person's message alone (a turn with automatic
 * document context searches first, and is not called early). The start statement and the provider's answer then
 * overlap instead of following each other. The limiter is asked first, as the run's first step would.
 */
export function callEarly(
  deps: { limiter: UsageLimiter; models: ModelFactory },
  log: RunLog,
  turn: EarlyTurn,
  message: string,
  start: Extract<Frame, { type: 'start' }>,
): EarlyCall {
  const controller = new AbortController();
  // Nobody knows the run's id before the turn is stored and answered, so no one can follow its log early: the
  // start frame's round trip to the event port overlaps the store too.
  const logged = log.frame(turn.tenantId, start.run_id, start);
  logged.catch(() => undefined);
  const started = (async () => {
    const messages = await promptOf(turn, turn.systemPrompt ?? '', [[{ role: 'user', content: message }]]);
    const admission = await deps.limiter.admit(turn.tenantId, turn.limits, () => planned(turn, messages));
    const stream = callModel(turn, deps.models(turn.target, turn.model), messages, controller.signal)[Symbol.asyncIterator]();
    // A stream runs nothing until asked: asking for its first part sends the request now.
    return { messages, stream, parts: resumed(stream.next(), stream), admission };
  })();
  // Not awaited until the run's first step: a refusal is that step's to report, or nobody's when it is dropped.
  started.catch(() => undefined);
  return { controller, started, logged, key: runLogKey(turn.tenantId, start.run_id) };
}

/** Drops an early call no run took over: aborts it, lets its stream end and releases its reservation. */
export function discardEarly(early: EarlyCall): void {
  early.controller.abort();
  early.started
    .then(async ({ stream, admission }) => {
      await admission.settle(null);
      await stream.return?.(undefined);
    })
    .catch(() => undefined);
}
