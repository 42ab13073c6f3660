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

/** What the person reads when a check fired: which one, not why. */
export function withheld(side: 'input' | 'output', check: string): string {
  return side === 'input'
    ? `This message was stopped by the project's guardrail '${check}', so it was not answered.`
    : `The answer was withheld by the project's guardrail '${check}'.`;
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
