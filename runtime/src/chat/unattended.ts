// Unattended runs (SPEC.md What the service does 6; DESIGN.md Runs): a task's fire or a trigger's event runs a turn
// for the person who made it, with nobody connected. What every kind shares: how one is started (no questions, no
// client tools, nothing scheduled from a schedule) and how its run's end reads as an outcome (SPEC.md Task status).
import type { AccessTokenGrant } from '@agentplane/lib/tokens/claims';

/** What starting an unattended run needs: whom it acts for and with what claims, its run id, and what it is told. */
export interface UnattendedStart {
  tenantId: string;
  actsAs: AccessTokenGrant;
  /** Named before the run exists, so a start repeated after a crash finds it. */
  runId: string;
  message: string;
  /** The conversation it posts into; null: a new one. */
  sessionId: string | null;
  model: string | null;
  /** The capability that lets it run at all, checked against the project's ceiling at each start. */
  needs: 'tasks:write' | 'triggers';
}

export type UnattendedStarted = { started: true; sessionId: string } | { started: false; error: string };

/** Starts an unattended run; wired in the composition root, over the chat service. */
export type StartUnattended = (start: UnattendedStart) => Promise<UnattendedStarted>;

/** The chat request of an unattended run: nobody is there to answer, so no questions and no client tools. */
export function unattendedRequest(start: Pick<UnattendedStart, 'message' | 'sessionId' | 'model'>) {
  return {
    message: start.message,
    ...(start.sessionId ? { session_id: start.sessionId } : {}),
    ...(start.model ? { model: start.model } : {}),
    enable_ask_user: false,
    // A schedule or an event schedules nothing more.
    enable_scheduling: false,
    tools: [],
  };
}

/** How an unattended run went. */
export interface RunOutcome {
  /** A one-shot task's final status; a trigger event's. */
  status: 'completed' | 'incomplete' | 'failed';
  finishReason: string | null;
  error: string | null;
}

/** SPEC.md Task status: a run that finished is `completed`; one that stopped short, `incomplete` with why; a broken one, `failed`. */
export function runOutcome(run: { status: string; finish_reason: string | null; error: Record<string, unknown> | null }): RunOutcome {
  if (run.status === 'failed') return { status: 'failed', finishReason: null, error: String(run.error?.message ?? 'the run failed') };
  // A run that paused for a person (an approval, a question, a client tool) needs input (SPEC.md).
  if (run.status === 'requires_action') return { status: 'incomplete', finishReason: 'needs_input', error: null };
  if (run.status === 'cancelled') return { status: 'incomplete', finishReason: 'cancelled', error: null };
  if (run.finish_reason !== null) return { status: 'incomplete', finishReason: run.finish_reason, error: null };
  return { status: 'completed', finishReason: null, error: null };
}

/**
 * Waits until no unattended start of some kind is under way (`starting` looks for one and answers its run id): what
 * an erase or a forget does after stopping the starts not begun, so each one under way has its run by the time the
 * runs are cancelled. Throws after `waitMs`, naming `what` and the run (the caller stops before any row goes).
 */
export async function untilNoneStarting(starting: () => Promise<string | undefined>, what: string, waitMs = 10_000): Promise<void> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const runId = await starting();
    if (runId === undefined) return;
    if (Date.now() > deadline) throw new Error(`${what} (run ${runId}) was still starting after ${waitMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
