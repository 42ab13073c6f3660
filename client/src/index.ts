// @agentplane/client: typed clients for agentplane's control plane (a customer's server, with a project key) and data
// plane (anyone holding an end-user token: browsers, servers, edge functions). README.md shows both.
export {
  createControlPlaneClient,
  signIn,
  type ControlPlaneClient,
  type ControlPlaneOptions,
  type MintRequest,
  type MintResponse,
  type SignInResponse,
} from './control-plane.js';
export {
  createDataPlaneClient,
  ChatClient,
  type ApprovalDecision,
  type CallOptions,
  type ChatRequest,
  type ClientOptions,
  type DataPlaneClient,
  type DataPlaneOptions,
  type PauseOptions,
  type QuestionAnswer,
  type SessionOut,
  type SessionQuery,
  type ToolResult,
} from './data-plane.js';
export { ChatStream, type ReconnectOptions } from './stream.js';
export {
  BrowserClient,
  type BrowserFrame,
  type BrowserFrameRequest,
  type BrowserInput,
  type Handoff,
  type HandoffCheck,
  type ScreencastEvent,
  type ScreencastFrame,
} from './browser.js';
export type { ChatResponse, DoneFrame, ErrorFrame, Frame, FrameType, RunAccepted, StartFrame, StreamFrame, TokenFrame, ToolEndFrame, ToolStartFrame } from './frames.js';
export { expiryOfJwt, REFRESH_MARGIN_MS, type ProvidedToken, type TokenProvider } from './credentials.js';
export {
  AgentplaneError,
  AuthenticationError,
  BadRequestError,
  ConflictError,
  ConnectionError,
  InternalServerError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  StreamError,
  TimeoutError,
  UnprocessableEntityError,
  type AgentplaneErrorFields,
  type ErrorBody,
  type StreamErrorFields,
} from './errors.js';
export { paginate, type Page } from './pages.js';
export type { RetryOptions } from './transport.js';
/**
 * The control plane's paths and schemas, generated from its OpenAPI document (docs/api/control-plane.openapi.json,
 * and /docs on the service), which is their reference.
 * @hidden
 */
export type * as ControlPlane from './generated/control-plane.js';
/**
 * The data plane's paths and schemas, generated from its OpenAPI document (docs/api/data-plane.openapi.json, and
 * /docs on the service), which is their reference.
 * @hidden
 */
export type * as DataPlane from './generated/data-plane.js';
