// What a turn is once prepared, and the state of its run that the parts running and writing it share: kept apart
// so the engine, the loop, its tool calls and its writes can each name them without importing one another.
import type { Effort } from '@agentplane/lib/permissions';
import type { ModelMessage, ProviderTarget, StreamPart } from '../../models/port.js';
import type { MessageRow, NewMessage } from '../../sessions/conversations.js';
import type { SessionPending } from '../../store/schema.js';
import type { ModelPrice } from '../../tenants/configuration.js';
import type { CitationStyle, Source } from '../citations.js';
import type { TurnGuardrails } from '../guardrails.js';
import type { Admission, UsageLimits } from '../limits.js';
import type { RunStatus } from '../runs.js';
import type { ChatResponseOutput, CitationOutput, Frame } from '../schemas.js';
import type { ClearedCall, ToolSet } from '../tools.js';
import type { UsageRow } from '../turn-records.js';

/** Everything a run needs, decided before it starts (prepare.ts). */
export interface Turn {
  runId: string;
  sessionId: string;
  tenantId: string;
  /** The subject whose turn this is (the conversation's owner): what it writes is recorded as theirs. */
  subject: string;
  model: string;
  target: ProviderTarget;
  price: ModelPrice | undefined;
  tools: ToolSet;
  systemPrompt: string | null;
  effort: Effort | undefined;
  limits: UsageLimits | undefined;
  maxToolIterations: number | undefined;
  maxContextTokens: number | undefined;
  /** Title the conversation after this turn when it has none. */
  autoTitle: boolean;
  /**
   * The project's automatic document context (docs/decisions/0045): the passages the person may read that best
   * match their message, handed to the model with the system prompt before its first step.
   */
  context?: () => Promise<{ sources: Source[]; style?: CitationStyle }>;
  /**
   * The conversation as the turn's start left it, its new messages last: the first step's prompt. The run keeps it
   * up to date with what it writes itself (it alone writes to the session while it runs), so no step re-reads it.
   */
  history: MessageRow[];
  /** Server calls the person approved (SPEC.md Approval pause): made before the first model step. */
  cleared?: ClearedCall[];
  /** The project's guardrails (docs/decisions/0064), and the person's message its input checks judge. */
  guardrails?: TurnGuardrails;
  inputText?: string;
}

export interface TurnTotals {
  inputTokens: number;
  outputTokens: number;
  costUsd: number | null;
  /** What the turn's document searches found, numbered as the answer cites them. */
  citations: CitationOutput[];
}

export const emptyTotals = (): TurnTotals => ({ inputTokens: 0, outputTokens: 0, costUsd: null, citations: [] });

/** How a run's loop ended, for the statement that ends the run and its `done` frame. */
export interface Outcome {
  status: Exclude<RunStatus, 'running' | 'failed'>;
  finishReason: ChatResponseOutput['finish_reason'];
  content: string;
  messageId: string | null;
  pending: SessionPending | null;
  /** The last step's message and usage, not yet written: the statement that ends the run writes them. */
  last?: { draftId: string | null; message: NewMessage; usage: UsageRow | undefined };
  /** The last step's token frames on their way to the log, while the statement that ends the run is written. */
  tokensLogged?: Promise<void>;
}

/** A run this process holds: how to stop it, and whether a steer was announced since its last boundary. */
export interface HeldRun {
  controller: AbortController;
  steerNoticed: boolean;
  /** The lease renewal found the run no longer this process's (finished elsewhere, or swept as lost). */
  lost: boolean;
  /** Told the terminal frame once it is in the log, or undefined when the run stopped without writing one here. */
  ended?: (frame: TerminalFrame | undefined) => void;
  /** The first model call, sent before the run was stored; its first step takes it over or drops it. */
  early?: EarlyCall;
  /**
   * The run's writes still under way, in the order they were started: a tool step's message and answers are written
   * while its calls and the next model call are made. Whatever writes after them (a steer taken, a broken step's
   * text, the run's end) waits for them first; a failure among them fails the run there.
   */
  writes: Promise<void>;
}

export type TerminalFrame = Extract<Frame, { type: 'done' | 'error' }>;

/** The run's log, as the parts of a run write to it (the engine's: it knows who waits on a run's end). */
export interface RunLog {
  frame(tenantId: string, runId: string, frame: Frame): Promise<void>;
  end(tenantId: string, runId: string, frame: TerminalFrame, options?: { stored?: boolean }): Promise<void>;
}

/** What a turn's first model call needs before the turn is stored. */
export type EarlyTurn = Pick<Turn, 'tenantId' | 'model' | 'target' | 'price' | 'tools' | 'systemPrompt' | 'effort' | 'limits' | 'maxContextTokens'>;

/**
 * A turn's first model call, sent while the turn's rows are stored (docs/decisions/0050). The run takes it over at
 * launch when its first prompt is the one the call was sent with; otherwise, and when the turn was not stored, it
 * is dropped.
 */
export interface EarlyCall {
  /** The call's own: aborted when the call is dropped, and by the run's (a cancel, a drain's cut-off) once taken over. */
  controller: AbortController;
  /**
   * The call under way: its prompt, its parts and its reservation on the project's caps. Rejects as the call would
   * have (the limiter's refusal, say).
   */
  started: Promise<{ messages: ModelMessage[]; parts: AsyncIterable<StreamPart>; stream: AsyncIterator<StreamPart>; admission: Admission }>;
  /** The run's `start` frame, appended to its log meanwhile too; rejects when the log refused it. */
  logged: Promise<void>;
  /** The run's log. */
  key: string;
}
