// Request, response and frame schemas of the chat routes; they validate requests and feed /openapi.json. SPEC.md
// leaves most payloads "not shown": docs/decisions/0017-turn-engine.md records the choices.
import { z } from 'zod';
import { queryNumber } from '@agentplane/lib/schemas/query';
import { EFFORTS, REQUEST_FLAGS, type RequestFlag } from '@agentplane/lib/permissions';
import { malformedUnless } from '@agentplane/lib/http/routes';
import { jsonValue } from '@agentplane/lib/schemas/json';

export const maxMessageLength = 100_000;
export const maxClientTools = 128;
/** Longest tool result kept (SPEC.md Limits: webhook tool responses are kept to 20,000 characters; client tools alike). */
export const maxToolResultLength = 20_000;

/** What a function name may be at every OpenAI-compatible provider. */
export const toolName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'tool names are 1 to 64 letters, digits, `_` or `-`');

const flagsShape = Object.fromEntries(
  REQUEST_FLAGS.map((flag) => [flag, z.boolean().optional().meta({ description: 'false declines the feature for this request; unset or true declines nothing' })]),
) as Record<RequestFlag, z.ZodOptional<z.ZodBoolean>>;

export const ClientTool = z
  .strictObject({
    name: toolName,
    description: z.string().max(4000).default(''),
    parameters: z
      .record(z.string(), jsonValue)
      .default({ type: 'object', properties: {} })
      .meta({ description: 'A JSON Schema object for the arguments' }),
    requiresApproval: malformedUnless((value): value is boolean => typeof value === 'boolean', 'requiresApproval must be true or false')
      .meta({ type: 'boolean', description: 'Pause for the person\'s approval before the call reaches the client. Any value but true or false (null, 0, "false") is 400' })
      .optional(),
    requires_approval: malformedUnless((_value): _value is never => false, 'the write surface spells it requiresApproval')
      .meta({ not: {}, description: 'Refused with 400 whatever its value: the write surface spells it `requiresApproval`' })
      .optional(),
  })
  .meta({ id: 'ClientTool', description: 'A tool the application runs: its calls come back in `tool_calls` with `requires_action` true' });

const toolCallId = z.string().min(1).max(256);

export const ToolResult = z
  .strictObject({
    tool_call_id: toolCallId,
    content: z
      .union([z.string(), jsonValue])
      .meta({ description: `What the tool returned: text, or any JSON (sent to the model as JSON text). Kept to ${maxToolResultLength} characters` }),
    is_error: z.boolean().optional().meta({ description: 'The tool failed; the content says how' }),
  })
  .meta({ id: 'ToolResult' });

export const ApprovalDecision = z
  .strictObject({
    tool_call_id: toolCallId,
    approved: z.boolean(),
    note: z.string().max(4000).optional().meta({ description: 'Passed to the agent with the decision' }),
  })
  .meta({ id: 'ApprovalDecision' });

export const QuestionAnswer = z
  .strictObject({ tool_call_id: toolCallId, answer: z.string().max(maxMessageLength) })
  .meta({ id: 'QuestionAnswer' });

export const ChatRequest = z
  .strictObject({
    message: z.string().max(maxMessageLength).optional().meta({ description: 'The person\'s message. Optional only when the request answers a pause' }),
    session_id: z.uuid().optional().meta({ description: 'The conversation to continue; omitted starts a new one' }),
    model: z.string().min(1).max(256).optional().meta({ description: 'A model the project registered; omitted uses the tenant\'s, then the project\'s default' }),
    system_prompt: z.string().max(100_000).optional().meta({ description: 'Needs capability `system_prompt`. The project\'s system prompt wins: when the project has one, this is not used' }),
    effort: z.enum(EFFORTS).optional().meta({ description: 'Reasoning effort, capped by the token\'s `max_effort`' }),
    tools: z.array(ClientTool).max(maxClientTools).optional().meta({ description: 'Client-side tools for this request' }),
    allowed_tools: z.array(z.string().max(256)).max(512).optional().meta({ description: 'Narrows the tools of this request by name' }),
    plugins: z.array(z.string().max(256)).max(512).optional().meta({ description: 'Narrows the skills of this request by name' }),
    output_modalities: z.array(z.string().max(64)).max(16).optional(),
    question_answers: z.array(QuestionAnswer).max(64).optional(),
    approval_decisions: z.array(ApprovalDecision).max(64).optional(),
    tool_results: z.array(ToolResult).max(128).optional(),
    ...flagsShape,
  })
  .refine(
    (request) => request.message !== undefined || [request.tool_results, request.approval_decisions, request.question_answers].some((list) => list !== undefined && list.length > 0),
    { message: 'message is required unless the request answers a pause (tool_results, approval_decisions or question_answers)', path: ['message'] },
  )
  .meta({
    id: 'ChatRequest',
    // The same rule as the refinement above, in the document's own words (JSON Schema cannot read a refinement).
    anyOf: [
      { required: ['message'] },
      { required: ['tool_results'], properties: { tool_results: { minItems: 1 } } },
      { required: ['approval_decisions'], properties: { approval_decisions: { minItems: 1 } } },
      { required: ['question_answers'], properties: { question_answers: { minItems: 1 } } },
    ],
  });
export type ChatRequestInput = z.infer<typeof ChatRequest>;

export const ToolCallOut = z
  .object({
    id: z.string(),
    name: z.string(),
    arguments: z.record(z.string(), jsonValue).meta({ description: 'The arguments the model wrote, parsed' }),
  })
  .meta({ id: 'ToolCall' });

export const ApprovalOut = z
  .object({
    tool_call_id: z.string(),
    action: z.string().meta({ description: 'One line: the tool\'s own description, or what the model said it would do' }),
    detail: z.string().meta({ description: 'The arguments being decided' }),
    tool: z.string().nullable().meta({ description: 'The tool; null when the model asked through `request_approval`' }),
    arguments: z.record(z.string(), jsonValue),
  })
  .meta({ id: 'Approval' });

export const QuestionOut = z
  .object({
    tool_call_id: z.string(),
    question: z.string(),
    options: z.array(z.string()).optional().meta({ description: 'Suggested answers, when the agent gave some' }),
  })
  .meta({ id: 'Question' });

export const HandoffOut = z
  .object({
    tool_call_id: z.string(),
    instructions: z.string().meta({ description: 'What the agent asks the person to do on the page' }),
    read_only: z.boolean().meta({ description: 'The person may watch the page but not act on it (input is refused with 403)' }),
    url: z.string().meta({ description: 'Where the page was when it was handed over' }),
  })
  .meta({
    id: 'Handoff',
    description:
      'A page the agent handed to the person (`browser_handoff`): watch it at GET /chat/sessions/{session_id}/browser/stream, act on it with POST .../browser/input, ask POST .../browser/check whether it is done; the next POST /chat ends the hand-off and the agent goes on with the page as the person left it',
  });

export const UsageOut = z
  .object({ input_tokens: z.int(), output_tokens: z.int(), total_tokens: z.int(), cost_usd: z.number().nullable() })
  .meta({ id: 'TurnUsage' });

export const FINISH_REASONS = ['max_tool_iterations', 'guardrail', 'no_model', 'needs_input', 'no_answer', 'subagents_incomplete', 'cancelled', 'length', 'content_filter'] as const;

export const CitationOut = z
  .object({
    index: z.int().meta({ description: 'The marker the answer cites it by: [index]' }),
    document_id: z.uuid(),
    title: z.string(),
    chunk_id: z.uuid(),
    ordinal: z.int().meta({ description: 'The chunk\'s place in the document (GET /documents/{id}/chunks)' }),
    heading_path: z.array(z.string()),
    page: z.int().nullable(),
    score: z.number().meta({ description: 'The search\'s fused score; comparable within one search only' }),
  })
  .meta({ id: 'Citation' });
export type CitationOutput = z.infer<typeof CitationOut>;

export const ChatResponse = z
  .object({
    run_id: z.string(),
    session_id: z.uuid(),
    message_id: z.uuid().nullable().meta({ description: 'The assistant message this turn wrote last; null when it wrote none' }),
    model: z.string().nullable(),
    content: z.string().meta({ description: 'The final assistant text; may be empty' }),
    finish_reason: z
      .enum(FINISH_REASONS)
      .nullable()
      .meta({ description: 'null: the agent finished on its own. `cancelled`: stopped by POST .../cancel. `length`, `content_filter`: the provider stopped it' }),
    requires_action: z.boolean().meta({ description: 'The turn is paused: answer `tool_calls`, `approvals` and `questions`, or finish the `handoffs`, and send the next POST /chat' }),
    tool_calls: z.array(ToolCallOut).meta({ description: 'Client tool calls to run; send their results as `tool_results`' }),
    approvals: z.array(ApprovalOut).meta({ description: 'Calls waiting for a decision; answer with `approval_decisions`' }),
    questions: z.array(QuestionOut).meta({ description: 'Questions the agent asked (`ask_user`); answer with `question_answers`' }),
    handoffs: z.array(HandoffOut).meta({ description: 'Pages the agent handed to the person (`browser_handoff`); the next POST /chat ends them' }),
    usage: UsageOut,
    citations: z.array(CitationOut).meta({ description: 'The passages the turn\'s document searches found, numbered as the answer cites them; empty when it searched nothing' }),
  })
  .meta({ id: 'ChatResponse' });
export type ChatResponseOutput = z.infer<typeof ChatResponse>;

export const SteerRequest = z
  .strictObject({ message: z.string().min(1).max(maxMessageLength) })
  .meta({ id: 'SteerRequest' });

export const RunAccepted = z
  .object({ run_id: z.string(), accepted: z.literal(true), status: z.string().nullable().meta({ description: 'The run\'s status as this service knows it; null when it knows none' }) })
  .meta({ id: 'RunAccepted' });

export const RunIdParams = z.object({ run_id: z.string().min(1).max(200).meta({ description: 'The `run_id` of the `start` frame (also the `X-Run-Id` header)' }) });

export const ResumeQuery = z.object({
  last_event_id: queryNumber((n) => n.int().min(0)).optional().meta({ description: 'Frames after this id; the `Last-Event-ID` header wins when both are sent' }),
});

export const SessionIdParams = z.object({ session_id: z.uuid({ error: 'session_id must be a UUID' }) });

export const FollowupsRequest = z
  .strictObject({ count: z.int().min(1).max(5).default(3) })
  .meta({ id: 'FollowupsRequest' });
export const FollowupsOut = z.object({ followups: z.array(z.string()) }).meta({ id: 'FollowupsOut' });
export const RecapOut = z.object({ recap: z.string() }).meta({ id: 'RecapOut' });

// Frames of a run log (the SSE `event:` is the type). Each is stored as `{ type, ...payload }`.
export type Frame =
  | { type: 'start'; run_id: string; session_id: string; model: string | null }
  | { type: 'token'; text: string }
  | { type: 'tool_start'; tool_call_id: string; name: string; arguments: unknown }
  | { type: 'tool_end'; tool_call_id: string; name: string; ok: boolean; result: string }
  | ({ type: 'done' } & ChatResponseOutput)
  | { type: 'error'; status: number; code: string; message: string; retryable: boolean; run_id: string | null; session_id: string | null };

export const TERMINAL_FRAMES = new Set(['done', 'error']);
