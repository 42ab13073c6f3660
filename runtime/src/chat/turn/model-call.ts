// A step's model call: the prompt it is sent, the request, and the relay that takes its tokens to the run's log.
// Shared by the loop's steps and by the early call a new conversation's first step may take over, so both send the
// same request for the same prompt.
import type { LanguageModel, ModelMessage, StreamPart } from '../../models/port.js';
import { clampHistory } from '../history.js';
import type { PlannedCall } from '../limits.js';
import type { Frame } from '../schemas.js';
import type { EarlyTurn, Turn } from './turn.js';

/** A step's prompt: the system text (none when empty), then the conversation, clamped to the turn's context. */
export function promptOf(turn: Pick<Turn, 'maxContextTokens'>, system: string, conversation: ModelMessage[][]): Promise<ModelMessage[]> {
  return clampHistory(system === '' ? null : { role: 'system', content: system }, conversation, turn.maxContextTokens);
}

/** The model call of a step: its parts as they come. */
export function callModel(turn: EarlyTurn, model: LanguageModel, messages: ModelMessage[], signal: AbortSignal): AsyncIterable<StreamPart> {
  const tools = turn.tools.definitions();
  return model.stream({
    model: turn.model,
    messages,
    ...(tools.length > 0 ? { tools } : {}),
    ...(turn.effort === undefined ? {} : { effort: turn.effort }),
    signal,
  });
}

/** A step's model call as the caps' estimate sees it (built only for a project with a token or spend cap). */
export function planned(turn: EarlyTurn, messages: ModelMessage[]): PlannedCall {
  return { model: turn.model, price: turn.price, messages, tools: turn.tools.definitions() };
}

/**
 * A stream whose first part was asked for already: that part, then the rest. Left early, it ends the stream
 * underneath too, whether or not it got past the first part.
 */
export async function* resumed<T>(first: Promise<IteratorResult<T>>, rest: AsyncIterator<T>): AsyncGenerator<T, void, undefined> {
  let delegated = false;
  try {
    const head = await first;
    if (head.done) return;
    yield head.value;
    delegated = true;
    yield* { [Symbol.asyncIterator]: () => rest };
  } finally {
    if (!delegated) await rest.return?.(undefined);
  }
}

/** Token frames in flight at most before the relay waits for the log: a slow event port slows the step, not memory. */
const TOKENS_IN_FLIGHT = 64;

/**
 * Token frames of one step, appended without waiting for each: the event port keeps their order (one connection to
 * Redis, a synchronous in-process append), so they go out pipelined instead of one round trip after another. The
 * step waits for them all before it ends, and a failed append fails the step there.
 */
export class TokenRelay {
  private readonly inFlight = new Set<Promise<void>>();
  private failure: { error: unknown } | undefined;

  constructor(private readonly append: (frame: Frame) => Promise<void>) {}

  async send(frame: Frame): Promise<void> {
    if (this.failure) throw this.failure.error;
    const sent: Promise<void> = this.append(frame).then(
      () => void this.inFlight.delete(sent),
      (error: unknown) => {
        this.inFlight.delete(sent);
        this.failure ??= { error };
      },
    );
    this.inFlight.add(sent);
    if (this.inFlight.size >= TOKENS_IN_FLIGHT) await Promise.all(this.inFlight);
  }

  /** Resolves when every frame sent is in the log; rejects with the first append that failed. */
  async flushed(): Promise<void> {
    await Promise.all(this.inFlight);
    if (this.failure) throw this.failure.error;
  }
}
