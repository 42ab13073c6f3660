// An in-process model behind the port (as the Vercel AI SDK's mock language model): it answers each call with the
// next scripted response and records every call it gets (target, model, messages with any tool's pictures, tools,
// options), so the turn engine's logic is tested with no HTTP and no provider. Benchmarks use it to measure the
// engine alone.
import { AppError } from '@agentplane/lib/errors';
import {
  MODEL_PORT_VERSION,
  ModelCallAbortedError,
  type GenerateResult,
  type LanguageModel,
  type ModelFactory,
  type ModelRequest,
  type ModelToolCall,
  type ProviderTarget,
  type StreamPart,
  type Usage,
} from './port.js';

/**
 * One scripted part: a part of the port, or a pause. `hang` waits until the call's signal fires (then the stream
 * ends as a real adapter's does, with an aborted `error` part); `wait` holds the stream until its promise settles.
 */
export type ScriptedPart = StreamPart | { type: 'hang' } | { type: 'wait'; until: Promise<unknown> };

/** The answer to one call: its parts in order, or a function of the call that returns them. */
export type ScriptedResponse = readonly ScriptedPart[] | ((call: RecordedModelCall) => readonly ScriptedPart[]);

/** A call the model received, as it received it (the signal is kept so a test can see an abort reach the model). */
export interface RecordedModelCall {
  method: 'generate' | 'stream';
  target: ProviderTarget;
  modelId: string;
  request: ModelRequest;
}

/** Script helpers: the parts of a plain answer, of tool calls, and of a failure. */
export const script = {
  text(text: string, usage: Usage = { inputTokens: 10, outputTokens: 5 }): ScriptedPart[] {
    return [...(text === '' ? [] : [{ type: 'text-delta' as const, text }]), { type: 'finish', finishReason: 'stop', usage }];
  },
  toolCalls(calls: ModelToolCall[], usage: Usage = { inputTokens: 10, outputTokens: 5 }): ScriptedPart[] {
    return [...calls.map((call) => ({ type: 'tool-call' as const, call })), { type: 'finish', finishReason: 'tool_calls', usage }];
  },
  error(error: AppError): ScriptedPart[] {
    return [{ type: 'error', error }];
  },
};

/** What a call past the end of the script answers: a test that did not expect it sees why in the run's error. */
const scriptExhausted = () => new AppError('upstream_failed', 'the scripted model has no response left for this call', { code: 'script_exhausted' });

export class ScriptedModels {
  /** Every call, in the order received. */
  readonly calls: RecordedModelCall[] = [];
  private readonly responses: ScriptedResponse[];

  constructor(responses: readonly ScriptedResponse[] = []) {
    this.responses = [...responses];
  }

  /** Adds responses for the calls still to come. */
  push(...responses: ScriptedResponse[]): void {
    this.responses.push(...responses);
  }

  /** Responses not yet used. */
  get remaining(): number {
    return this.responses.length;
  }

  /** The port's factory: every model it builds answers from this one script. */
  readonly factory: ModelFactory = (target, modelId) => new ScriptedModel(this, target, modelId);

  /** Records the call and takes its response. */
  next(call: RecordedModelCall): readonly ScriptedPart[] {
    this.calls.push(call);
    const response = this.responses.shift();
    if (response === undefined) return script.error(scriptExhausted());
    return typeof response === 'function' ? response(call) : response;
  }
}

class ScriptedModel implements LanguageModel {
  readonly specificationVersion = MODEL_PORT_VERSION;

  constructor(
    private readonly script: ScriptedModels,
    private readonly target: ProviderTarget,
    readonly modelId: string,
  ) {}

  async generate(request: ModelRequest): Promise<GenerateResult> {
    const parts = this.script.next({ method: 'generate', target: this.target, modelId: this.modelId, request });
    const result: GenerateResult = { text: '', toolCalls: [], finishReason: 'stop', usage: { inputTokens: 0, outputTokens: 0 } };
    for (const part of parts) {
      if (request.signal?.aborted) throw new ModelCallAbortedError();
      if (part.type === 'hang') await untilAborted(request.signal);
      else if (part.type === 'wait') await part.until;
      else if (part.type === 'text-delta') result.text += part.text;
      else if (part.type === 'tool-call') result.toolCalls.push(part.call);
      else if (part.type === 'finish') Object.assign(result, { finishReason: part.finishReason, usage: part.usage });
      else throw part.error;
    }
    if (request.signal?.aborted) throw new ModelCallAbortedError();
    return result;
  }

  async *stream(request: ModelRequest): AsyncIterable<StreamPart> {
    const parts = this.script.next({ method: 'stream', target: this.target, modelId: this.modelId, request });
    for (const part of parts) {
      if (request.signal?.aborted) break;
      if (part.type === 'hang') await untilAborted(request.signal);
      else if (part.type === 'wait') await part.until;
      else {
        yield part;
        if (part.type === 'error' || part.type === 'finish') return;
      }
    }
    // Like a real adapter: a call whose signal fired ends with one aborted `error` part.
    if (request.signal?.aborted) yield { type: 'error', error: new ModelCallAbortedError() };
  }
}

/** Resolves when the signal fires; never without one (a hang with no signal is a test that forgot to pass it). */
function untilAborted(signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    signal?.addEventListener('abort', () => resolve(), { once: true });
  });
}
