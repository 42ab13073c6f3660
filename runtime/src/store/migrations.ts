// The runtime's schema, in order. Released migrations are never edited: add a new one.
import type { Migration } from '@agentplane/lib/db/migrate';

export const runtimeMigrations: Migration[] = [
  {
    version: 1,
    name: 'tenants',
    statements: [
      // pgvector: every later feature that stores embeddings in the database needs it; fail early if missing.
      'create extension if not exists vector',
      `create table tenants (
        tenant_id uuid primary key,
        name text not null,
        settings_json jsonb not null default '{}'::jsonb,
        secret_settings text,
        webhook_secret text not null,
        webhook_secret_rotated_at timestamptz not null default now(),
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`,
      `create table tenant_erasures (
        tenant_id uuid primary key,
        erased_at timestamptz not null default now(),
        complete boolean not null,
        report jsonb not null
      )`,
    ],
  },
  {
    version: 2,
    name: 'tenant_configurations',
    statements: [
      // One row per tenant: the latest configuration the control plane pushed. The key to tenants makes a purge
      // that forgets this table fail loudly instead of leaving a configuration behind.
      `create table tenant_configurations (
        tenant_id uuid primary key references tenants (tenant_id),
        version integer not null check (version >= 1),
        digest text not null,
        document jsonb not null,
        updated_at timestamptz not null default now()
      )`,
    ],
  },
  {
    version: 3,
    name: 'tenant_narrowing_keys',
    statements: [
      // One row per tenant: the key ring the runtime signs narrowed tokens with (POST /auth/token), created on the
      // first narrowing and read by every replica. The key to tenants makes an erase that forgot it fail.
      `create table tenant_narrowing_keys (
        tenant_id uuid primary key references tenants (tenant_id),
        key_ids text not null,
        sealed_ring text not null,
        created_at timestamptz not null default now()
      )`,
    ],
  },
  {
    version: 4,
    name: 'conversations',
    statements: [
      // A conversation. `owner` is the subject that created it (visibility is decided against it and the caller's
      // scope); `status` and `model` are the rollup the latest turn leaves; `pending` is the open pause (approvals,
      // questions, client tool calls) that the next request must answer, kept here so any replica can resume it.
      `create table sessions (
        id uuid primary key,
        tenant_id uuid not null references tenants (tenant_id),
        owner text not null,
        title text not null default '',
        model text,
        status text not null default 'idle',
        parent_session_id uuid,
        pending jsonb,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`,
      'create index sessions_list on sessions (tenant_id, updated_at desc, id desc)',
      // `seq` orders a conversation and answers `after`; `id` is what clients name.
      `create table messages (
        seq bigint generated always as identity primary key,
        id uuid not null unique,
        tenant_id uuid not null references tenants (tenant_id),
        session_id uuid not null references sessions (id),
        run_id text,
        role text not null,
        content text not null default '',
        tool_calls jsonb,
        tool_call_id text,
        name text,
        model text,
        metadata jsonb,
        created_at timestamptz not null default now()
      )`,
      'create index messages_session on messages (session_id, seq)',
      // One row per turn. `lease_expires_at` is renewed by the process running it; a run whose lease lapsed is
      // failed by any replica, so a crashed process never leaves a turn that looks alive.
      `create table runs (
        id text primary key,
        tenant_id uuid not null references tenants (tenant_id),
        session_id uuid not null references sessions (id),
        subject text not null,
        model text,
        status text not null,
        finish_reason text,
        error jsonb,
        cancel_requested boolean not null default false,
        lease_owner text,
        lease_expires_at timestamptz,
        created_at timestamptz not null default now(),
        finished_at timestamptz
      )`,
      // At most one running turn per conversation, enforced by the database on every replica.
      "create unique index runs_one_running on runs (session_id) where status = 'running'",
      "create index runs_leases on runs (lease_expires_at) where status = 'running'",
      'create index runs_tenant on runs (tenant_id)',
      // Steer messages waiting for the run's next step boundary.
      `create table run_steers (
        seq bigint generated always as identity primary key,
        tenant_id uuid not null references tenants (tenant_id),
        run_id text not null references runs (id),
        message text not null,
        consumed_at timestamptz,
        created_at timestamptz not null default now()
      )`,
      'create index run_steers_run on run_steers (run_id, seq)',
      // Token usage and cost of every model call, per tenant, model and session (the usage views read it).
      `create table usage_records (
        id bigint generated always as identity primary key,
        tenant_id uuid not null references tenants (tenant_id),
        session_id uuid,
        run_id text,
        model text not null,
        purpose text not null,
        input_tokens integer not null,
        output_tokens integer not null,
        cost_usd double precision,
        created_at timestamptz not null default now()
      )`,
      'create index usage_records_tenant on usage_records (tenant_id, created_at)',
      // One vote per person per message.
      `create table message_feedback (
        tenant_id uuid not null references tenants (tenant_id),
        message_id uuid not null references messages (id),
        subject text not null,
        rating text not null,
        comment text,
        model text,
        updated_at timestamptz not null default now(),
        primary key (message_id, subject)
      )`,
    ],
  },
  {
    version: 5,
    name: 'message_subjects',
    statements: [
      // Every message records the subject that wrote it (docs/decisions/0026). Earlier rows take the subject of the
      // run that wrote them, or the conversation's owner (fork copies and seeded rows have no run).
      'alter table messages add column subject text',
      `update messages set subject = coalesce(
        (select runs.subject from runs where runs.id = messages.run_id),
        (select sessions.owner from sessions where sessions.id = messages.session_id)
      )`,
      'alter table messages alter column subject set not null',
    ],
  },
  {
    version: 6,
    name: 'run_steer_waiting',
    statements: [
      // A steer queued for a run marks the run's own row, so ending the run can tell "a steer is waiting" from the
      // row it updates, in the same statement, and a steer racing the end either lands first or finds it finished
      // (docs/decisions/0035).
      'alter table runs add column steer_waiting boolean not null default false',
      `update runs set steer_waiting = true where exists (
        select 1 from run_steers where run_steers.run_id = runs.id and run_steers.consumed_at is null
      )`,
    ],
  },
  {
    version: 7,
    name: 'documents',
    statements: [
      // A document: its record, who sees it (docs/decisions/0039) and where its bytes are. tenant_id null is the
      // project's own corpus, uploaded on the control plane and seen by every tenant's end-users.
      `create table documents (
        id uuid primary key,
        tenant_id uuid references tenants (tenant_id),
        owner text,
        visibility text not null,
        scope text,
        allowed_roles text[] not null default '{}',
        allowed_groups text[] not null default '{}',
        title text not null,
        filename text,
        content_type text not null,
        declared_size bigint,
        size_bytes bigint,
        blob_key text not null,
        status text not null,
        failure text,
        upload_id text,
        upload_part_size bigint,
        upload_part_count integer,
        upload_expires_at timestamptz,
        metadata jsonb not null default '{}',
        chunk_count integer not null default 0,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        uploaded_at timestamptz,
        ingested_at timestamptz
      )`,
      'create index documents_tenant on documents (tenant_id, created_at desc, id)',
      // The sweeper's question: uploads abandoned past their deadline.
      "create index documents_abandoned on documents (upload_expires_at) where status = 'uploading'",
    ],
  },
  {
    version: 8,
    name: 'document_chunks',
    statements: [
      // The generation of chunks a document serves: a reingest writes the next one beside it and swaps in one
      // transaction, so retrieval answers from the old chunks until the new ones are complete.
      'alter table documents add column generation integer not null default 0',
      // A document's chunks (docs/decisions/0040), with a full-text vector for keyword search; the ACL stays on the
      // document, which every search joins (docs/decisions/0039).
      `create table document_chunks (
        id uuid primary key,
        document_id uuid not null references documents (id) on delete cascade,
        tenant_id uuid references tenants (tenant_id),
        generation integer not null,
        ordinal integer not null,
        content text not null,
        heading_path text[] not null default '{}',
        start_offset integer not null,
        end_offset integer not null,
        page integer,
        tokens integer not null,
        search tsvector generated always as (to_tsvector('simple', content)) stored,
        unique (document_id, generation, ordinal)
      )`,
      'create index document_chunks_search on document_chunks using gin (search)',
      // A chunk's vector in one embedding space (provider, model, dimensions): a change of model embeds into a new
      // space beside the old one, which keeps answering until the new one is complete.
      `create table chunk_embeddings (
        chunk_id uuid not null references document_chunks (id) on delete cascade,
        space text not null,
        embedding vector not null,
        primary key (chunk_id, space)
      )`,
      // Ingestion as durable jobs: one row per document waiting or being read, leased like a run, so a job
      // survives a restart and a crash mid-document and is taken up again once its lease lapses.
      `create table ingest_jobs (
        document_id uuid primary key references documents (id) on delete cascade,
        tenant_id uuid references tenants (tenant_id),
        attempts integer not null default 0,
        run_after timestamptz not null default now(),
        lease_owner text,
        lease_expires_at timestamptz,
        last_error text,
        created_at timestamptz not null default now()
      )`,
      'create index ingest_jobs_due on ingest_jobs (run_after)',
    ],
  },
  {
    version: 9,
    name: 'embedding_spaces',
    statements: [
      // The embedding spaces a tenant's documents have been embedded in (provider, model, dimension), and whether
      // every document has its vectors there yet: retrieval answers from the newest complete one, so a change of
      // model keeps the old index answering until the new one is built (docs/decisions/0041).
      `create table embedding_spaces (
        tenant_id uuid not null references tenants (tenant_id),
        space text not null,
        provider text not null,
        model text not null,
        dimensions integer not null,
        created_at timestamptz not null default now(),
        ready_at timestamptz,
        primary key (tenant_id, space)
      )`,
      // A document's chunks to embed into a space they have no vectors in yet (a change of model), leased like
      // ingest jobs; the chunks themselves are left as they are.
      `create table embedding_jobs (
        document_id uuid not null references documents (id) on delete cascade,
        space text not null,
        tenant_id uuid references tenants (tenant_id),
        attempts integer not null default 0,
        run_after timestamptz not null default now(),
        lease_owner text,
        lease_expires_at timestamptz,
        last_error text,
        primary key (document_id, space)
      )`,
      'create index embedding_jobs_due on embedding_jobs (run_after)',
    ],
  },
  {
    version: 10,
    name: 'corpus_in_its_tenant',
    statements: [
      // The project's corpus is kept in the project's own tenant (visibility `project`, no owner), not in a null
      // tenant: a runtime that serves several projects' tenants must never show one project's corpus to another's
      // end-users (docs/decisions/0043). Nothing wrote null-tenant documents outside tests; any left are dropped.
      'delete from documents where tenant_id is null',
      'delete from ingest_jobs where tenant_id is null',
      'delete from embedding_jobs where tenant_id is null',
      'alter table documents alter column tenant_id set not null',
      'alter table document_chunks alter column tenant_id set not null',
      'alter table ingest_jobs alter column tenant_id set not null',
      'alter table embedding_jobs alter column tenant_id set not null',
    ],
  },
  {
    version: 11,
    name: 'memory_and_wiki',
    statements: [
      // What the agent remembers for one subject (docs/decisions/0044): searched by words, and by meaning in the
      // embedding space it was embedded in (the tenant's model when it was remembered).
      `create table memory_items (
        id uuid primary key,
        tenant_id uuid not null references tenants (tenant_id),
        subject text not null,
        content text not null,
        session_id uuid,
        space text,
        embedding vector,
        search tsvector generated always as (to_tsvector('simple', content)) stored,
        created_at timestamptz not null default now()
      )`,
      'create index memory_items_subject on memory_items (tenant_id, subject, created_at desc, id)',
      // Pages the agent writes for the project, seen by the subtree of the writer's scope; one page per title there.
      `create table wiki_pages (
        id uuid primary key,
        tenant_id uuid not null references tenants (tenant_id),
        scope text not null,
        title text not null,
        content text not null,
        author text not null,
        search tsvector generated always as (to_tsvector('simple', title || ' ' || content)) stored,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        unique (tenant_id, scope, title)
      )`,
      'create index wiki_pages_tenant on wiki_pages (tenant_id, updated_at desc, id)',
    ],
  },
  {
    version: 12,
    name: 'project_vector_index',
    statements: [
      // A space in a project's own Pinecone index (docs/decisions/0047) keeps that index's host and sealed key, so
      // its vectors can still be searched, followed and removed after the project moves to another index.
      'alter table embedding_spaces add column index_host text',
      'alter table embedding_spaces add column sealed_index_key text',
      // What an erase step reads before the rows go and needs after (the indexes holding the tenant's vectors),
      // kept with the erase record until the step has succeeded.
      "alter table tenant_erasures add column collected jsonb not null default '{}'::jsonb",
    ],
  },
  {
    version: 13,
    name: 'wiki_by_meaning',
    statements: [
      // A wiki page is found by meaning as memory items are: its title and content embedded in the model's space.
      'alter table wiki_pages add column space text',
      'alter table wiki_pages add column embedding vector',
    ],
  },
  {
    version: 14,
    name: 'vectors_by_space',
    statements: [
      // How many vectors a space holds, counted up to the size at which it is given its approximate index
      // (docs/decisions/0042): an index-only scan instead of a pass over every space's vectors.
      'create index chunk_embeddings_space on chunk_embeddings (space)',
    ],
  },
  {
    version: 15,
    name: 'tool_deliveries',
    statements: [
      // Each call of a webhook tool (docs/decisions/0052): when, which tool, for whom, how it went, an excerpt.
      `create table tool_deliveries (
        id uuid primary key,
        tenant_id uuid not null references tenants (tenant_id),
        tool_id text not null,
        tool text not null,
        session_id uuid not null,
        run_id text not null,
        subject text not null,
        status integer,
        ok boolean not null,
        attempts integer not null,
        duration_ms integer not null,
        result_excerpt text not null,
        error text,
        created_at timestamptz not null default now()
      )`,
      'create index tool_deliveries_recent on tool_deliveries (tenant_id, created_at desc, id)',
    ],
  },
  {
    version: 16,
    name: 'user_mcp_servers',
    statements: [
      // MCP servers end-users attach for themselves (docs/decisions/0053), their headers sealed.
      `create table user_mcp_servers (
        id uuid primary key,
        tenant_id uuid not null references tenants (tenant_id),
        owner text not null,
        name text not null,
        url text not null,
        transport text not null,
        header_names jsonb not null,
        sealed_headers text,
        created_at timestamptz not null default now(),
        unique (tenant_id, owner, name)
      )`,
    ],
  },
  {
    version: 17,
    name: 'session_todos',
    statements: [
      // The agent's plan for a conversation (capability `todo`; docs/decisions/0054): the whole list, replaced by
      // each write, gone with its conversation.
      `create table session_todos (
        session_id uuid primary key references sessions (id) on delete cascade,
        tenant_id uuid not null references tenants (tenant_id),
        items jsonb not null,
        updated_at timestamptz not null default now()
      )`,
    ],
  },
  {
    version: 18,
    name: 'plugins',
    statements: [
      // Skill packages (docs/decisions/0056): the project's (owner null) and each end-user's own, with their files.
      `create table plugins (
        id uuid primary key,
        tenant_id uuid not null references tenants (tenant_id),
        owner text,
        name text not null,
        manifest jsonb not null,
        skills jsonb not null,
        sealed_mcp_servers text,
        warnings jsonb not null,
        created_at timestamptz not null default now()
      )`,
      'create index plugins_tenant on plugins (tenant_id, created_at, id)',
      `create table plugin_files (
        plugin_id uuid not null references plugins (id) on delete cascade,
        path text not null,
        content bytea not null,
        primary key (plugin_id, path)
      )`,
    ],
  },
  {
    version: 19,
    name: 'tasks',
    statements: [
      // Scheduled tasks (docs/decisions/0058): what to say, when, and the claims of the person it acts for.
      `create table tasks (
        id uuid primary key,
        tenant_id uuid not null references tenants (tenant_id),
        owner text not null,
        name text not null,
        prompt text not null,
        cron text,
        timezone text not null default '',
        interval_seconds integer,
        run_at timestamptz,
        callback_url text,
        session_id uuid,
        model text,
        acts_as jsonb not null,
        status text not null,
        run_count integer not null default 0,
        last_error text,
        last_finish_reason text,
        last_run_error text,
        next_run_at timestamptz,
        last_run_at timestamptz,
        last_run_id text,
        last_session_id uuid,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`,
      "create index tasks_due on tasks (next_run_at) where status = 'scheduled'",
      'create index tasks_tenant on tasks (tenant_id, created_at, id)',
      // One row per slot a task fired for: the key that makes a slot fire once, whoever fires it.
      `create table task_fires (
        task_id uuid not null references tasks (id) on delete cascade,
        slot timestamptz not null,
        tenant_id uuid not null,
        run_id text not null unique,
        session_id uuid,
        state text not null,
        claimed_by text,
        claim_expires_at timestamptz,
        started_at timestamptz,
        outcome jsonb,
        created_at timestamptz not null default now(),
        primary key (task_id, slot)
      )`,
      "create index task_fires_open on task_fires (claim_expires_at) where state <> 'settled'",
      'create index task_fires_tenant on task_fires (tenant_id)',
    ],
  },
  {
    version: 20,
    name: 'event_deliveries',
    statements: [
      // Events sent to a project's webhook URL and a task's callback URL (docs/decisions/0059): one row per target,
      // retried with backoff until delivered or dead.
      `create table event_deliveries (
        id uuid primary key,
        event_id uuid not null,
        tenant_id uuid not null references tenants (tenant_id),
        type text not null,
        target text not null,
        url text not null,
        payload jsonb not null,
        status text not null,
        attempts integer not null default 0,
        attempt_log jsonb not null default '[]',
        next_attempt_at timestamptz not null default now(),
        claimed_by text,
        claim_expires_at timestamptz,
        last_status integer,
        last_error text,
        created_at timestamptz not null default now(),
        delivered_at timestamptz
      )`,
      "create index event_deliveries_due on event_deliveries (next_attempt_at) where status = 'pending'",
      'create index event_deliveries_tenant on event_deliveries (tenant_id, created_at desc, id)',
    ],
  },
  {
    version: 21,
    name: 'triggers',
    statements: [
      // Webhook triggers (docs/decisions/0060): a secret URL that starts an unattended run of its owner. The URL's
      // slug is kept as a hash (it is the credential); a rotated-out one answers until previous_until.
      `create table triggers (
        id uuid primary key,
        tenant_id uuid not null references tenants (tenant_id),
        owner text not null,
        name text not null,
        prompt text not null,
        slug_hash text not null unique,
        previous_slug_hash text unique,
        previous_until timestamptz,
        url_hint text not null,
        signing_secret text,
        session_id uuid,
        model text,
        callback_url text,
        rate_per_minute integer not null,
        acts_as jsonb not null,
        fire_count integer not null default 0,
        last_fired_at timestamptz,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`,
      'create index triggers_tenant on triggers (tenant_id, created_at, id)',
      // One row per event taken: its key makes a repeat within 24 hours a duplicate, and it is started, and
      // settled, as a task's fire is.
      `create table trigger_events (
        id uuid primary key,
        trigger_id uuid not null references triggers (id) on delete cascade,
        tenant_id uuid not null,
        event_key text not null,
        message text not null,
        run_id text not null unique,
        session_id uuid,
        state text not null,
        claimed_by text,
        claim_expires_at timestamptz,
        received_at timestamptz not null default now(),
        started_at timestamptz,
        outcome jsonb,
        unique (trigger_id, event_key)
      )`,
      "create index trigger_events_open on trigger_events (claim_expires_at) where state <> 'settled'",
      'create index trigger_events_tenant on trigger_events (tenant_id)',
      'create index trigger_events_received on trigger_events (received_at)',
    ],
  },
  {
    version: 22,
    name: 'recent runs',
    statements: [
      // A tenant's turns newest first: turn health's window and streak (docs/decisions/0061).
      'create index runs_tenant_recent on runs (tenant_id, created_at desc)',
    ],
  },
  {
    version: 23,
    name: 'audit',
    statements: [
      // The append-only audit log (docs/decisions/0065): who did what, when, from where, and how it went.
      `create table audit_log (
        id bigint generated always as identity primary key,
        tenant_id uuid not null,
        at timestamptz not null default now(),
        actor text not null,
        actor_kind text not null,
        action text not null,
        resource jsonb not null default '{}',
        outcome text not null,
        status integer,
        ip text,
        request_id text
      )`,
      'create index audit_log_tenant on audit_log (tenant_id, id desc)',
      'create index audit_log_actor on audit_log (tenant_id, actor, id desc)',
      // Append-only, enforced by the database: rows are never changed or removed, except by a tenant's erase (its
      // transaction says so) and by forgetting a subject, which may only replace that subject as actor.
      `create function audit_log_append_only() returns trigger language plpgsql as $$
      begin
        if tg_op = 'DELETE' and current_setting('agentplane.audit', true) = 'erase' then
          return old;
        end if;
        if tg_op = 'UPDATE' and current_setting('agentplane.audit', true) = 'forget'
          and new.actor like 'forgotten:%' and new.id = old.id and new.tenant_id = old.tenant_id and new.at = old.at
          and new.action = old.action and new.resource = old.resource and new.outcome = old.outcome
          and new.status is not distinct from old.status and new.request_id is not distinct from old.request_id then
          return new;
        end if;
        raise exception 'the audit log is append-only' using errcode = '42501';
      end
      $$`,
      'create trigger audit_log_append_only before update or delete on audit_log for each row execute function audit_log_append_only()',
      // What forgetting a subject left: when, who asked, and what went; never the subject.
      `create table forget_records (
        id uuid primary key,
        tenant_id uuid not null references tenants (tenant_id),
        at timestamptz not null default now(),
        requested_by text not null,
        erased jsonb not null
      )`,
    ],
  },
  {
    // Tasks whose CronJob exists on Kubernetes (docs/decisions/0066): the database scheduler leaves their slots to
    // the CronJob's Jobs for a grace period, and fires a slot itself only when no Job did.
    version: 24,
    name: 'task cronjobs',
    statements: ['alter table tasks add column on_cronjob boolean not null default false'],
  },
  {
    // An answered write's audit entry is spooled to a local file before its batch is written (docs/decisions/0065):
    // replayed after a kill -9, its key makes a second write of it insert nothing.
    version: 25,
    name: 'audit spool',
    statements: ['alter table audit_log add column spool_key uuid', 'create unique index audit_log_spool_key on audit_log (spool_key) where spool_key is not null'],
  },
  {
    // A document whose ingest is being retried says so (docs/decisions/0072): the attempts made at its current
    // reading, beside the last error in `failure`.
    version: 26,
    name: 'document ingest attempts',
    statements: ['alter table documents add column ingest_attempts integer not null default 0'],
  },
  {
    // The staging keys single uploads are PUT to (docs/decisions/0073): each is kept (bytes, then a tombstone that
    // refuses the upload URL) until its sweep, when the object and the row go. Not erased with the tenant: the sweep
    // also removes what a URL still alive wrote after the erase.
    version: 27,
    name: 'upload staging',
    statements: [
      `create table upload_staging (
        key text primary key,
        tenant_id uuid not null,
        sweep_after timestamptz not null
      )`,
      'create index upload_staging_sweep on upload_staging (sweep_after)',
    ],
  },
  {
    // The subjects a tenant forgot, as digests, and when (docs/decisions/0074): a token issued to one before its forget
    // is refused on every replica.
    version: 28,
    name: 'forgotten subjects',
    statements: [
      `create table forgotten_subjects (
        tenant_id uuid not null references tenants (tenant_id),
        subject_digest text not null,
        forgotten_at timestamptz not null,
        primary key (tenant_id, subject_digest)
      )`,
    ],
  },
  {
    // Sandboxes (docs/decisions/0079): who made each, which conversation's agent uses it, its state and limits; the
    // host holds its processes and /workspace. A deleted one keeps its row (state `deleted`) until the tenant goes.
    version: 29,
    name: 'sandboxes',
    statements: [
      `create table sandboxes (
        id uuid primary key,
        tenant_id uuid not null references tenants (tenant_id),
        owner text not null,
        session_id uuid,
        name text,
        host text not null,
        holder text,
        state text not null,
        limits jsonb not null,
        image text,
        failure text,
        exec_count integer not null default 0,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        last_active_at timestamptz not null default now(),
        expires_at timestamptz not null,
        paused_at timestamptz,
        stopped_at timestamptz,
        deleted_at timestamptz
      )`,
      'create index sandboxes_tenant_created on sandboxes (tenant_id, created_at desc, id)',
      "create unique index sandboxes_conversation on sandboxes (session_id) where session_id is not null and state not in ('deleted', 'failed')",
      "create index sandboxes_live on sandboxes (state, last_active_at) where state in ('running', 'paused', 'creating')",
    ],
  },
];
