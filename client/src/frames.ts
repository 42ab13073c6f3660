// The frames of a chat stream (SPEC.md Events; the data plane's runtime/src/chat/schemas.ts `Frame`). The OpenAPI
// document names the frame types but carries each payload as JSON text, so the payloads are written here; `done`
// is the generated ChatResponse.
import type { components } from './generated/data-plane.js';

export type ChatResponse = components['schemas']['ChatResponse'];
export type RunAccepted = components['schemas']['RunAccepted'];

/** Every frame type the data plane sends: its document's list. */
export type FrameType = components['schemas']['RunStreamEvent']['event'];

export type StartFrame = { type: 'start'; run_id: string; session_id: string; model: string | null };
export type TokenFrame = { type: 'token'; text: string };
export type ToolStartFrame = { type: 'tool_start'; tool_call_id: string; name: string; arguments: unknown };
export type ToolEndFrame = { type: 'tool_end'; tool_call_id: string; name: string; ok: boolean; result: string };
export type DoneFrame = { type: 'done' } & ChatResponse;
export type ErrorFrame = {
  type: 'error';
  status: number;
  code: string;
  message: string;
  retryable: boolean;
  run_id: string | null;
  session_id: string | null;
  /** On a rate limit or spend cap: when it resets. */
  reset_at?: string;
};

export type Frame = StartFrame | TokenFrame | ToolStartFrame | ToolEndFrame | DoneFrame | ErrorFrame;

// A frame type added to the document and not here fails the type check.
type Unlisted = Exclude<FrameType, Frame['type']>;
const everyTypeListed: Unlisted extends never ? true : false = true;
void everyTypeListed;

/** The frames a stream yields: an `error` frame ends it with a StreamError instead (terminal). */
export type StreamFrame = Exclude<Frame, ErrorFrame>;
