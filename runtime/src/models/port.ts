// The model port (version 1): what the turn engine asks of a language model, whatever serves it. A stream is a
// discriminated union of parts ending in exactly one `finish` or `error`; it is consumed once and aborts the
// upstream call when the consumer stops early or the signal fires. Adapters: openai.ts (OpenAI and every
// OpenAI-compatible endpoint).
import { AppError } from '@agentplane/lib/errors';
import type { Effort } from '@agentplane/lib/permissions';

export const MODEL_PORT_VERSION = 'v1' as const;

/** A JSON-schema function the model may call. */
export interface ModelTool {
  name: string;
  description: string;
  /** A JSON Schema object for the arguments. */
  parameters: Record<string, unknown>;
}

export interface ModelToolCall {
  /** The provider's call id; tool results answer it. */
  id: string;
  name: string;
  /** The arguments as the model wrote them (JSON text, possibly invalid: the engine decides). */
  arguments: string;
}

/** A picture the model is shown (a page's screenshot): its bytes in base64. */
export interface ModelImage {
  mediaType: 'image/jpeg' | 'image/png';
  data: string;
}

export type ModelMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string; toolCalls?: ModelToolCall[] }
  /** `images`: what the tool answered beside its text, for a model that perceives images (capability `input:image`). */
  | { role: 'tool'; toolCallId: string; content: string; images?: ModelImage[] };

export interface ModelRequest {
  model: string;
  messages: ModelMessage[];
  tools?: ModelTool[];
  /** Sent as the provider's reasoning setting where it has one; omitted means the provider's default. */
  effort?: Effort;
  /** Upper bound on generated tokens, when the caller wants one. */
  maxOutputTokens?: number;
  /** Aborts the upstream request (cancel, client gone, shutdown). */
  signal?: AbortSignal;
}

export interface Usage {
  inputTokens: number;
  outputTokens: number;
}

/** Why the model stopped: `stop` (finished), `tool_calls`, `length` (hit its token limit), `content_filter`, `other`. */
export type ModelFinishReason = 'stop' | 'tool_calls' | 'length' | 'content_filter' | 'other';

export type StreamPart =
  | { type: 'text-delta'; text: string }
  /** A complete tool call, emitted once its arguments are whole. */
  | { type: 'tool-call'; call: ModelToolCall }
  | { type: 'finish'; finishReason: ModelFinishReason; usage: Usage }
  /** Terminal: the typed error the engine reports (upstream_failed 502, upstream_timeout 504, invalid_argument 400). */
  | { type: 'error'; error: AppError };

/**
 * What a stream ends with, and `generate` throws, when `request.signal` fired: not a provider failure, so the engine
 * looks at the signal itself (cancel, client gone, shutdown) to decide what the turn became.
 */
export class ModelCallAbortedError extends AppError {
  constructor() {
    super('internal', 'the model call was aborted', { code: 'aborted' });
    this.name = 'ModelCallAbortedError';
  }
}

export interface GenerateResult {
  text: string;
  toolCalls: ModelToolCall[];
  finishReason: ModelFinishReason;
  usage: Usage;
}

export interface LanguageModel {
  readonly specificationVersion: typeof MODEL_PORT_VERSION;
  /** The model id sent to the provider. */
  readonly modelId: string;
  /** Throws the typed errors listed on StreamPart `error`. */
  generate(request: ModelRequest): Promise<GenerateResult>;
  /** Never throws: failures arrive as one terminal `error` part. */
  stream(request: ModelRequest): AsyncIterable<StreamPart>;
}

/** Where a tenant's calls for one model go: resolved by the engine from the pushed configuration. */
export interface ProviderTarget {
  baseUrl: string;
  apiKey: string;
}

/** Builds a model bound to a provider target; one per provider kind. */
export type ModelFactory = (target: ProviderTarget, modelId: string) => LanguageModel;
