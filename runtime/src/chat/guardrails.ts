// A project's guardrails in its turns (docs/decisions/0064): the input checks judge the person's message before any
// model is called, the output checks the agent's answer before it is stored. One that fires ends the turn with
// finish reason `guardrail` and an answer that names the check, never its rules. Compiled once per configuration.
import type { OpenAI } from 'openai';
import { compileSide, type CompiledSide } from '@agentplane/lib/guardrails';
import type { Logger } from '@agentplane/lib/logging';
import type { ProviderTarget } from '../models/port.js';
import type { StoredConfiguration } from '../tenants/configuration.js';

export interface TurnGuardrails {
  input: CompiledSide;
  output: CompiledSide;
}

const compiled = new WeakMap<StoredConfiguration, TurnGuardrails | null>();

/** The configuration's guardrails, compiled; null when it has none. */
export function guardrailsOf(configuration: StoredConfiguration): TurnGuardrails | null {
  if (compiled.has(configuration)) return compiled.get(configuration)!;
  const rails = configuration.document.guardrails;
  const made = rails && (rails.input.length > 0 || rails.output.length > 0) ? { input: compileSide(rails.input), output: compileSide(rails.output) } : null;
  compiled.set(configuration, made);
  return made;
}

/** How the answer to a message an input check stopped begins: the history knows such messages by it. */
export const INPUT_STOPPED = "This message was stopped by the project's guardrail '";
/** What the model is shown in place of what the person said that an input check stopped, in later turns. */
export const INPUT_WITHHELD = '[Withheld: this message was stopped by the project\'s guardrail.]';

/** What the person reads when a check fired: which one, not why. */
export function withheld(side: 'input' | 'output', check: string): string {
  return side === 'input' ? `${INPUT_STOPPED}${check}', so it was not answered.` : `The answer was withheld by the project's guardrail '${check}'.`;
}

/** Calls a moderation model on the turn's provider (its `/moderations` endpoint) through the openai SDK. */
export type Moderate = (target: ProviderTarget, model: string, text: string, signal: AbortSignal) => Promise<boolean>;

export function moderator(clientFor: (target: ProviderTarget) => OpenAI, logger: Logger): Moderate {
  return async (target, model, text, signal) => {
    try {
      const answer = await clientFor(target).moderations.create({ model, input: text }, { signal });
      return answer.results.some((result) => result.flagged);
    } catch (error) {
      if (signal.aborted) throw error;
      // Fails open: a moderation endpoint that is down or missing must not stop every turn of the project. Said in
      // the logs (without the text), and the other checks still run.
      logger.warn({ err: error, model }, 'a moderation guardrail could not be checked; the text was let through');
      return false;
    }
  };
}

/** The first check of `side` that fires on `text`: the text checks, then each moderation model in turn. */
export async function firstFiring(side: CompiledSide, text: string, moderate: Moderate | undefined, target: ProviderTarget, signal: AbortSignal): Promise<string | null> {
  if (side.empty || text === '') return null;
  const byText = side.firstFiring(text);
  if (byText !== null) return byText;
  for (const check of side.moderation) {
    if (moderate && (await moderate(target, check.model, text, signal))) return check.name;
  }
  return null;
}

/** Characters of a streamed answer held back behind what was judged: no match this long is ever half shown. */
export const HELD_CHARS = 256;
/** Judged again once this much more arrived, or an eighth of the text so far: a long answer costs O(n log n). */
const JUDGE_EVERY_CHARS = 64;

/**
 * The output checks on a streamed answer (docs/decisions/0064, streams): tokens are relayed only once the text up to
 * them has passed the text checks, with the last HELD_CHARS held back, so a check that fires mid-answer stops the
 * step before any of what it matched was shown. The text is judged up to its last whitespace (a word cut mid-way
 * could look like a listed one). A side with a moderation model holds the whole step back: the model judges the final
 * answer before a word of it goes out. The step's end releases the rest (the final answer after its full judgement).
 */
export class OutputGate {
  private released = 0;
  private judged = 0;
  /** Where the last judgement was tried, and how far the text was looked through for whitespace. */
  private tried = 0;
  private scanned = 0;
  private lastBreak = 0;

  constructor(private readonly side: CompiledSide) {}

  /** Given the step's whole text so far: what may be relayed now, or the check that fired. */
  grow(text: string): { release: string; fired: string | null } {
    if (this.side.moderation.length > 0) return { release: '', fired: null };
    // Each character is looked at once for whitespace, whatever the chunking.
    for (; this.scanned < text.length; this.scanned++) if (WHITESPACE.test(text[this.scanned]!)) this.lastBreak = this.scanned + 1;
    if (text.length - this.tried < Math.max(JUDGE_EVERY_CHARS, text.length / 8)) return { release: '', fired: null };
    this.tried = text.length;
    // A long run with no whitespace (a key, base64, some scripts) is judged whole: no word to cut in two there.
    const cut = text.length - this.lastBreak > UNBROKEN_CHARS ? text.length : this.lastBreak;
    if (cut <= this.judged) return { release: '', fired: null };
    this.judged = cut;
    const fired = this.side.firstFiring(text.slice(0, cut));
    if (fired !== null) return { release: '', fired };
    return { release: this.releaseTo(text, cut - HELD_CHARS), fired: null };
  }

  /** Everything not relayed yet, once the whole text has passed. */
  rest(text: string): string {
    return this.releaseTo(text, text.length);
  }

  /** What was relayed so far: all a draft of the answer, or a broken step's kept text, may hold. */
  shown(text: string): string {
    return text.slice(0, this.released);
  }

  private releaseTo(text: string, end: number): string {
    let upTo = Math.min(end, text.length);
    // Never between the halves of a surrogate pair.
    if (upTo > 0 && upTo < text.length && /[\uD800-\uDBFF]/.test(text[upTo - 1]!)) upTo--;
    if (upTo <= this.released) return '';
    const piece = text.slice(this.released, upTo);
    this.released = upTo;
    return piece;
  }
}

const WHITESPACE = /\s/;
/** Past this many characters without whitespace, the text is judged up to its end. */
const UNBROKEN_CHARS = 1_024;
