// The runtime's tables as Kysely sees them. Every table that holds tenant data has `tenant_id`.
import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type Json<T> = ColumnType<T, string, string>;

export interface TenantsTable {
  tenant_id: string;
  name: string;
  /** Settings that are not secret, as given (merged by PATCH). */
  settings_json: Json<Record<string, unknown>>;
  /** Secret settings (for example `litellm_key`), sealed JSON; shown only redacted. */
  secret_settings: string | null;
  /** The key that signs deliveries to the customer, sealed. */
  webhook_secret: string;
  webhook_secret_rotated_at: Timestamp;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** What an erase did, kept after the tenant's rows are gone so a repeated DELETE can finish the best-effort part. */
export interface TenantErasuresTable {
  tenant_id: string;
  erased_at: Timestamp;
  complete: boolean;
  report: Json<unknown>;
  /** What erase steps collected before the rows went, by step name; kept until the step succeeds. */
  collected: ColumnType<Record<string, unknown>, string | undefined, string>;
}

/** The latest configuration the control plane pushed for a tenant (docs/decisions/0013). */
export interface TenantConfigurationsTable {
  tenant_id: string;
  /** The control plane's counter; only a higher one replaces the row. */
  version: number;
  /** SHA-256 of the document in canonical JSON: tells a repeated push from a conflicting one, and keys caches. */
  digest: string;
  /** The configuration without its version. */
  document: Json<unknown>;
  updated_at: Timestamp;
}

/** A tenant's narrowing key ring (docs/decisions/0016): signs the tokens `POST /auth/token` issues. */
export interface TenantNarrowingKeysTable {
  tenant_id: string;
  /** The ring's key ids, active first, space-separated: public, and what tells a cached ring from a replaced one. */
  key_ids: string;
  /** The whole ring (private keys included) as JSON, sealed under the master key and bound to the tenant. */
  sealed_ring: string;
  created_at: Timestamp;
}

/** What a paused turn waits for (docs/decisions/0017); the next request on the session must answer it. */
export interface PendingHandoff {
  tool_call_id: string;
  instructions: string;
  /** The person may watch but not act (input is refused with 403). */
  read_only: boolean;
  /** Where the page was when it was handed over. */
  url: string;
  ended_by?: 'check';
}

export interface SessionPending {
  run_id: string;
  /** Calls that need the client's results (client tools, and approved client calls waiting to run). */
  tool_calls: { id: string; name: string; arguments: Record<string, unknown> }[];
  approvals: {
    tool_call_id: string;
    action: string;
    detail: string;
    tool: string | null;
    arguments: Record<string, unknown>;
    /**
     * What approving does: a client call goes back to the client; a server call (a webhook tool) is run by the
     * service when the turn goes on; `request_approval` is answered "approved".
     */
    kind: 'client' | 'server' | 'request_approval';
  }[];
  questions: { tool_call_id: string; question: string; options?: string[] }[];
  /**
   * Pages the agent handed to the person (`browser_handoff`): the next POST /chat ends them, whatever it holds.
   * `ended_by` records that the hand-off check found the person done. Absent in rows stored before hand-offs.
   */
  handoffs?: PendingHandoff[];
  /** Server calls approved while something else still waits: run once the pause resolves. */
  cleared?: { id: string; name: string; arguments: Record<string, unknown> }[];
}

export interface SessionsTable {
  id: string;
  tenant_id: string;
  /** The subject that created it; visibility is decided against it. */
  owner: string;
  title: Generated<string>;
  model: string | null;
  /** Rollup of the latest turn: idle, running, requires_action, completed, failed, cancelled. */
  status: Generated<string>;
  parent_session_id: string | null;
  pending: ColumnType<SessionPending | null, string | null | undefined, string | null>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface MessagesTable {
  seq: Generated<string>;
  id: string;
  tenant_id: string;
  session_id: string;
  run_id: string | null;
  /** The subject that wrote it (docs/decisions/0026): the sender of a user message, the turn's subject otherwise. */
  subject: string;
  /** user, assistant or tool. */
  role: string;
  content: Generated<string>;
  tool_calls: ColumnType<{ id: string; name: string; arguments: string }[] | null, string | null | undefined, string | null>;
  tool_call_id: string | null;
  /** The tool's name on a tool message. */
  name: string | null;
  /** The model that wrote an assistant message. */
  model: string | null;
  metadata: ColumnType<Record<string, unknown> | null, string | null | undefined, string | null>;
  created_at: Timestamp;
}

export interface RunsTable {
  id: string;
  tenant_id: string;
  session_id: string;
  subject: string;
  model: string | null;
  /** running, completed, requires_action, failed, cancelled. */
  status: string;
  finish_reason: string | null;
  error: ColumnType<Record<string, unknown> | null, string | null | undefined, string | null>;
  cancel_requested: Generated<boolean>;
  /** A steer message waits in run_steers: set by queueing one, cleared by taking them. */
  steer_waiting: Generated<boolean>;
  lease_owner: string | null;
  lease_expires_at: Timestamp | null;
  created_at: Timestamp;
  finished_at: Timestamp | null;
}

export interface RunSteersTable {
  seq: Generated<string>;
  tenant_id: string;
  run_id: string;
  message: string;
  consumed_at: Timestamp | null;
  created_at: Timestamp;
}

export interface UsageRecordsTable {
  id: Generated<string>;
  tenant_id: string;
  session_id: string | null;
  run_id: string | null;
  model: string;
  /** turn, title, followups, recap. */
  purpose: string;
  input_tokens: number;
  output_tokens: number;
  /** Null when the project set no price for the model. */
  cost_usd: number | null;
  created_at: Timestamp;
}

export interface MessageFeedbackTable {
  tenant_id: string;
  message_id: string;
  subject: string;
  /** up or down. */
  rating: string;
  comment: string | null;
  model: string | null;
  updated_at: Timestamp;
}

export type DocumentVisibility = 'project' | 'scope' | 'self';
export type DocumentStatus = 'uploading' | 'uploaded' | 'processing' | 'ready' | 'failed';

/** A document's record (docs/decisions/0039); its bytes are in the blob store under `blob_key`. */
export interface DocumentsTable {
  id: string;
  /** The project's corpus is in the project's tenant too (visibility `project`, owner null). */
  tenant_id: string;
  /** The subject that uploaded it; null for the project's corpus. */
  owner: string | null;
  visibility: DocumentVisibility;
  /** For visibility `scope`: the subtree that sees it (the uploader's scope). */
  scope: string | null;
  allowed_roles: ColumnType<string[], string[] | undefined, string[]>;
  allowed_groups: ColumnType<string[], string[] | undefined, string[]>;
  title: string;
  filename: string | null;
  content_type: string;
  /** What the upload said it would be; checked on complete. */
  declared_size: number | null;
  /** What arrived. */
  size_bytes: number | null;
  blob_key: string;
  status: DocumentStatus;
  /** Why it failed, for status `failed`; while `processing`, the last error of an ingest being retried. */
  failure: string | null;
  /** Attempts made at its current reading (0 again at each reingest). */
  ingest_attempts: Generated<number>;
  /** The multipart upload in progress, if any. */
  upload_id: string | null;
  upload_part_size: number | null;
  upload_part_count: number | null;
  /** When an upload not completed by then is abandoned (the sweeper removes it). */
  upload_expires_at: Timestamp | null;
  metadata: Json<Record<string, unknown>>;
  chunk_count: Generated<number>;
  created_at: Timestamp;
  updated_at: Timestamp;
  uploaded_at: Timestamp | null;
  ingested_at: Timestamp | null;
  /** The generation of chunks it serves (0: none yet). */
  generation: Generated<number>;
}

/** A staging key a presigned single upload writes to (docs/decisions/0073); swept, object and row, after `sweep_after`. */
export interface UploadStagingTable {
  key: string;
  tenant_id: string;
  /** Past the upload's deadline, so past its URL's expiry: nothing can write the key any more. */
  sweep_after: Timestamp;
}

export interface DocumentChunksTable {
  id: string;
  document_id: string;
  tenant_id: string;
  generation: number;
  ordinal: number;
  content: string;
  heading_path: ColumnType<string[], string[] | undefined, string[]>;
  start_offset: number;
  end_offset: number;
  page: number | null;
  tokens: number;
  /** Generated from `content`. */
  search: ColumnType<string, never, never>;
}

export interface ChunkEmbeddingsTable {
  chunk_id: string;
  /** The embedding space: provider, model and dimensions. */
  space: string;
  /** pgvector's text form, `[0.1,0.2,...]`. */
  embedding: string;
}

export interface IngestJobsTable {
  document_id: string;
  tenant_id: string;
  attempts: Generated<number>;
  run_after: Timestamp;
  lease_owner: string | null;
  lease_expires_at: Timestamp | null;
  last_error: string | null;
  created_at: Generated<Date>;
}

export interface EmbeddingSpacesTable {
  tenant_id: string;
  space: string;
  /** The provider credential's id, the model and its dimension: enough to embed a query in this space. */
  provider: string;
  model: string;
  dimensions: number;
  created_at: Generated<Date>;
  /** When every document had its vectors here; null while they are being made. */
  ready_at: Timestamp | null;
  /** The project's own Pinecone index the space's vectors are in (its host and sealed key); null: the deployment's. */
  index_host: ColumnType<string | null, string | null | undefined, string | null>;
  sealed_index_key: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface EmbeddingJobsTable {
  document_id: string;
  space: string;
  tenant_id: string;
  attempts: Generated<number>;
  run_after: Timestamp;
  lease_owner: string | null;
  lease_expires_at: Timestamp | null;
  last_error: string | null;
}

export interface RuntimeSchema {
  tenants: TenantsTable;
  embedding_spaces: EmbeddingSpacesTable;
  embedding_jobs: EmbeddingJobsTable;
  documents: DocumentsTable;
  upload_staging: UploadStagingTable;
  document_chunks: DocumentChunksTable;
  chunk_embeddings: ChunkEmbeddingsTable;
  ingest_jobs: IngestJobsTable;
  memory_items: MemoryItemsTable;
  wiki_pages: WikiPagesTable;
  sessions: SessionsTable;
  messages: MessagesTable;
  runs: RunsTable;
  run_steers: RunSteersTable;
  usage_records: UsageRecordsTable;
  message_feedback: MessageFeedbackTable;
  tenant_configurations: TenantConfigurationsTable;
  tenant_narrowing_keys: TenantNarrowingKeysTable;
  tenant_erasures: TenantErasuresTable;
  tool_deliveries: ToolDeliveriesTable;
  user_mcp_servers: UserMcpServersTable;
  session_todos: SessionTodosTable;
  plugins: PluginsTable;
  plugin_files: PluginFilesTable;
  tasks: TasksTable;
  sandboxes: SandboxesTable;
  task_fires: TaskFiresTable;
  event_deliveries: EventDeliveriesTable;
  triggers: TriggersTable;
  trigger_events: TriggerEventsTable;
  audit_log: AuditLogTable;
  forget_records: ForgetRecordsTable;
  forgotten_subjects: ForgottenSubjectsTable;
  schema_migrations: { version: number; name: string; applied_at: Generated<Date> };
}

/** A skill package (docs/decisions/0056): the project's (owner null) or one end-user's own. */
export interface PluginsTable {
  id: string;
  tenant_id: string;
  owner: string | null;
  name: string;
  manifest: ColumnType<Record<string, unknown>, string, string>;
  skills: ColumnType<Array<{ name: string; description: string; dir: string }>, string, string>;
  /** Its mcp.json's servers as JSON, sealed (their headers may hold keys); null: none. */
  sealed_mcp_servers: string | null;
  warnings: ColumnType<string[], string, string>;
  created_at: Generated<Date>;
}

export interface PluginFilesTable {
  plugin_id: string;
  path: string;
  content: Buffer;
}

/** One item of the agent's plan for a conversation. */
export interface TodoItem {
  id: string;
  content: string;
  status: 'pending' | 'in_progress' | 'completed';
}

/** The agent's plan for a conversation (docs/decisions/0054): replaced whole by each write. */
export interface SessionTodosTable {
  session_id: string;
  tenant_id: string;
  items: ColumnType<TodoItem[], string, string>;
  updated_at: ColumnType<Date, Date | undefined, Date>;
}

/** An MCP server an end-user attached for themselves (`mcp:manage`; docs/decisions/0053): private to its owner. */
export interface UserMcpServersTable {
  id: string;
  tenant_id: string;
  owner: string;
  name: string;
  url: string;
  transport: 'auto' | 'streamable_http' | 'sse';
  header_names: ColumnType<string[], string, string>;
  /** The headers as JSON, sealed; null: none. */
  sealed_headers: string | null;
  created_at: Generated<Date>;
}

/** One call of a webhook tool, as `GET /tools/deliveries` lists it (docs/decisions/0052): an excerpt, never a secret. */
export interface ToolDeliveriesTable {
  id: string;
  tenant_id: string;
  /** The control plane's tool id, and its name when called. */
  tool_id: string;
  tool: string;
  session_id: string;
  run_id: string;
  subject: string;
  /** The handler's HTTP status; null when none answered. */
  status: number | null;
  /** A 2xx answer. */
  ok: boolean;
  attempts: number;
  duration_ms: number;
  /** The start of what the agent was given (the handler's text, or why there was none). */
  result_excerpt: string;
  /** Why the call failed (no answer, a non-2xx status); null for a 2xx. */
  error: string | null;
  created_at: Generated<Date>;
}

/** What the agent remembers for one subject (docs/decisions/0044). */
export interface MemoryItemsTable {
  id: string;
  tenant_id: string;
  subject: string;
  content: string;
  /** The conversation it was remembered in, if any. */
  session_id: string | null;
  /** The embedding space of `embedding` (null: remembered without an embedding model). */
  space: string | null;
  /** pgvector's text form. */
  embedding: string | null;
  search: ColumnType<string, never, never>;
  created_at: Timestamp;
}

/** A page the agent wrote for the project, seen by the subtree of `scope` (the writer's token scope). */
export interface WikiPagesTable {
  id: string;
  tenant_id: string;
  scope: string;
  title: string;
  content: string;
  /** The subject whose turn wrote it last. */
  author: string;
  /** The embedding space of `embedding` (null: written without an embedding model, or its provider failed). */
  space: ColumnType<string | null, string | null | undefined, string | null>;
  /** Title and content embedded, as pgvector text. */
  embedding: ColumnType<string | null, string | null | undefined, string | null>;
  search: ColumnType<string, never, never>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

/** A scheduled task (docs/decisions/0058). */
export interface TasksTable {
  id: string;
  tenant_id: string;
  /** The subject it acts for, who created it. */
  owner: string;
  name: string;
  prompt: string;
  cron: string | null;
  /** IANA name; '' is UTC. */
  timezone: Generated<string>;
  interval_seconds: number | null;
  /** A one-shot task's moment. */
  run_at: Timestamp | null;
  callback_url: string | null;
  /** The conversation its fires post into; null: a new conversation each fire. */
  session_id: string | null;
  model: string | null;
  /** The claims of the token that created it (no registered claims): what its runs may do, under the current ceiling. */
  acts_as: ColumnType<Record<string, unknown>, string, string>;
  /** scheduled, running (a one-shot task's run under way), completed, incomplete, failed, cancelled. */
  status: string;
  run_count: Generated<number>;
  last_error: string | null;
  last_finish_reason: string | null;
  /** Why the last fire's run broke, for a recurring task too (last_error is a one-shot task's, per SPEC.md). */
  last_run_error: string | null;
  next_run_at: Timestamp | null;
  last_run_at: Timestamp | null;
  last_run_id: string | null;
  last_session_id: string | null;
  /** A CronJob on Kubernetes fires its slots; the database scheduler only those no Job fired in time. */
  on_cronjob: Generated<boolean>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

/** One slot a task fired for: pending (claimed, run not started), started, settled (its outcome written to the task). */
export interface TaskFiresTable {
  task_id: string;
  slot: Timestamp;
  tenant_id: string;
  run_id: string;
  session_id: string | null;
  state: string;
  claimed_by: string | null;
  claim_expires_at: Timestamp | null;
  started_at: Timestamp | null;
  outcome: ColumnType<Record<string, unknown> | null, string | null | undefined, string | null>;
  created_at: Generated<Date>;
}

/** One event to one target (docs/decisions/0059): pending until delivered, or dead once its attempts ran out. */
export interface EventDeliveriesTable {
  id: string;
  /** The event's id, shared by its targets and every attempt (`X-Delivery-Id`). */
  event_id: string;
  tenant_id: string;
  /** turn.stopped, scheduled_task.fired. */
  type: string;
  /** project (its webhook URL) or callback (a task's). */
  target: string;
  url: string;
  payload: ColumnType<Record<string, unknown>, string, string>;
  status: string;
  attempts: Generated<number>;
  attempt_log: ColumnType<DeliveryAttempt[], string | undefined, string>;
  next_attempt_at: Generated<Date>;
  claimed_by: string | null;
  claim_expires_at: Timestamp | null;
  last_status: number | null;
  last_error: string | null;
  created_at: Generated<Date>;
  delivered_at: Timestamp | null;
}

export interface DeliveryAttempt {
  at: string;
  status: number | null;
  error: string | null;
  duration_ms: number;
}

/** A webhook trigger (docs/decisions/0060). */
export interface TriggersTable {
  id: string;
  tenant_id: string;
  owner: string;
  name: string;
  prompt: string;
  /** SHA-256 (hex) of the URL's slug: the slug is the credential and is not kept. */
  slug_hash: string;
  previous_slug_hash: string | null;
  previous_until: Timestamp | null;
  /** The slug's last characters, to tell URLs apart. */
  url_hint: string;
  /** Sealed; null: the URL alone is the credential. */
  signing_secret: string | null;
  session_id: string | null;
  model: string | null;
  callback_url: string | null;
  rate_per_minute: number;
  acts_as: ColumnType<Record<string, unknown>, string, string>;
  fire_count: Generated<number>;
  last_fired_at: Timestamp | null;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
}

/** An event a trigger took: pending, starting, started (its run under way), settled. */
export interface TriggerEventsTable {
  id: string;
  trigger_id: string;
  tenant_id: string;
  event_key: string;
  /** What the run is told: the trigger's prompt and the event. */
  message: string;
  run_id: string;
  session_id: string | null;
  state: string;
  claimed_by: string | null;
  claim_expires_at: Timestamp | null;
  received_at: Generated<Date>;
  started_at: Timestamp | null;
  outcome: ColumnType<Record<string, unknown> | null, string | null | undefined, string | null>;
}

/** One entry of the append-only audit log (docs/decisions/0065). */
export interface AuditLogTable {
  id: Generated<string>;
  tenant_id: string;
  at: Generated<Date>;
  /** The subject, `admin` for the admin key, `task:<id>` or `trigger:<id>` for unattended work; `forgotten:<id>` once forgotten. */
  actor: string;
  actor_kind: string;
  action: string;
  resource: ColumnType<Record<string, unknown>, string | undefined, string>;
  /** ok, refused, failed. */
  outcome: string;
  status: number | null;
  ip: string | null;
  request_id: string | null;
  /** The key of an entry written from the local spool (null for entries written with what they tell of). */
  spool_key: string | null;
}

/** What forgetting a subject left: when, who asked, what went; never the subject. */
/** A subject the tenant forgot, by digest (docs/decisions/0074): its tokens issued before `forgotten_at` are refused. */
export interface ForgottenSubjectsTable {
  tenant_id: string;
  subject_digest: string;
  forgotten_at: Date;
}

export interface ForgetRecordsTable {
  id: string;
  tenant_id: string;
  at: Generated<Date>;
  requested_by: string;
  erased: ColumnType<Record<string, number>, string, string>;
}

export const SANDBOX_STATES = ['creating', 'running', 'paused', 'stopped', 'failed', 'deleted'] as const;
export type SandboxState = (typeof SANDBOX_STATES)[number];

export interface SandboxesTable {
  id: string;
  tenant_id: string;
  /** The subject that made it: the only one who may use or change it. */
  owner: string;
  /** The conversation whose agent uses it; null for one a person made. */
  session_id: string | null;
  name: string | null;
  host: 'local' | 'kubernetes';
  /** The runtime process holding a local sandbox's processes. */
  holder: string | null;
  state: SandboxState;
  limits: ColumnType<{ cpus: number; memoryMiB: number; processes: number; diskMiB: number }, string, string>;
  image: string | null;
  failure: string | null;
  exec_count: Generated<number>;
  created_at: Generated<Date>;
  updated_at: Generated<Date>;
  last_active_at: Generated<Date>;
  expires_at: Date;
  paused_at: Date | null;
  stopped_at: Date | null;
  deleted_at: Date | null;
}
