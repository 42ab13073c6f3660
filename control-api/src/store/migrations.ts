// The control-api's schema (PostgreSQL schema `control`), in order. Released migrations are never edited.
// It lives beside the runtime's tables when the all-in-one shares one database, with its own history.
import type { Migration } from '@agentplane/lib/db/migrate';

export const controlSchema = 'control';

export const controlMigrations: Migration[] = [
  {
    version: 1,
    name: 'accounts, orgs, sessions, projects',
    statements: [
      `create table control.accounts (
        id uuid primary key,
        email text not null unique,
        password_hash text not null,
        created_at timestamptz not null default now()
      )`,
      `create table control.orgs (
        id uuid primary key,
        name text not null,
        created_at timestamptz not null default now()
      )`,
      `create table control.org_members (
        org_id uuid not null references control.orgs (id) on delete cascade,
        account_id uuid not null references control.accounts (id) on delete cascade,
        role text not null check (role in ('owner', 'member')),
        primary key (org_id, account_id)
      )`,
      `create table control.sessions (
        id uuid primary key,
        token_hash text not null unique,
        account_id uuid not null references control.accounts (id) on delete cascade,
        created_at timestamptz not null default now(),
        expires_at timestamptz not null,
        revoked_at timestamptz
      )`,
      `create table control.projects (
        id uuid primary key,
        org_id uuid not null references control.orgs (id) on delete cascade,
        name text not null,
        tenant_id uuid not null unique,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now()
      )`,
      'create index projects_org on control.projects (org_id, created_at)',
    ],
  },
  {
    version: 2,
    name: 'project keys',
    statements: [
      `create table control.project_keys (
        id uuid primary key,
        project_id uuid not null references control.projects (id) on delete cascade,
        name text not null default '',
        scope text not null check (scope in ('mint', 'admin')),
        key_hash text not null unique,
        last_four text not null,
        created_at timestamptz not null default now(),
        created_by text not null,
        revoked_at timestamptz
      )`,
      'create index project_keys_project on control.project_keys (project_id, created_at)',
    ],
  },
  {
    version: 3,
    name: 'project configuration and signing keys',
    statements: [
      `alter table control.projects add column ceiling jsonb not null default '{}'::jsonb`,
      `alter table control.projects add column system_prompt text`,
      `alter table control.projects add column origins jsonb not null default '[]'::jsonb`,
      // The project's token signing key ring, sealed under the master key.
      `alter table control.projects add column signing_keys text`,
    ],
  },
  {
    version: 4,
    name: 'configuration outbox',
    statements: [
      // Bumped by every change of what the runtime must know; the runtime refuses an older one.
      'alter table control.projects add column config_version integer not null default 1',
      // No foreign key to projects: an erase must outlive the project row it was queued for.
      `create table control.outbox (
        id bigserial primary key,
        project_id uuid not null,
        tenant_id uuid not null,
        kind text not null check (kind in ('register_tenant', 'push_configuration')),
        payload jsonb not null default '{}'::jsonb,
        attempts integer not null default 0,
        next_attempt_at timestamptz not null default now(),
        last_error text,
        created_at timestamptz not null default now(),
        delivered_at timestamptz
      )`,
      'create index outbox_pending on control.outbox (project_id, id) where delivered_at is null',
    ],
  },
  {
    version: 5,
    name: 'providers and the default model',
    statements: [
      // The customer's own LLM credentials (bring your own keys). `api_key` is sealed under the master key with
      // associated data naming the project and the credential, so a sealed key copied to another row won't open.
      `create table control.providers (
        id uuid primary key,
        project_id uuid not null references control.projects (id) on delete cascade,
        provider text not null check (provider in ('openai', 'openai_compatible')),
        base_url text not null,
        models jsonb not null,
        embedding_model text,
        embedding_dim integer,
        api_key text not null,
        key_last_four text,
        created_at timestamptz not null default now(),
        refreshed_at timestamptz not null default now()
      )`,
      'create index providers_project on control.providers (project_id, created_at)',
      // Null: no default; nothing falls back to a shared model.
      'alter table control.projects add column default_model text',
    ],
  },
  {
    version: 6,
    name: 'provider prices and project usage limits',
    statements: [
      // The customer's own prices per model of the credential ({model: {input_per_million_usd,
      // output_per_million_usd}}); null: none set. Providers publish none, so nothing else fills it.
      'alter table control.providers add column prices jsonb',
      // The project's usage caps on its models (docs/decisions/0018); null: no cap.
      'alter table control.projects add column rpm_limit integer check (rpm_limit >= 1)',
      'alter table control.projects add column tpm_limit integer check (tpm_limit >= 1)',
      'alter table control.projects add column budget_amount_usd double precision check (budget_amount_usd > 0)',
      `alter table control.projects add column budget_window text check (budget_window in ('day', 'month'))`,
      'alter table control.projects add constraint projects_budget_whole check ((budget_amount_usd is null) = (budget_window is null))',
    ],
  },
  {
    version: 7,
    name: 'project removal',
    statements: [
      // Deleting a project removes its rows at once and queues the removal of what was provisioned for it (the
      // tenant's erase; on Kubernetes, the Project resource), delivered after the project's earlier entries.
      'alter table control.outbox drop constraint outbox_kind_check',
      `alter table control.outbox add constraint outbox_kind_check check (kind in ('register_tenant', 'push_configuration', 'remove_project'))`,
    ],
  },
  {
    version: 8,
    name: 'retrieval settings',
    statements: [
      // The project's chosen embedding model (provider, model, measured dimension); null: the measured model of its
      // oldest provider that has one (docs/decisions/0042).
      'alter table control.projects add column embedding jsonb',
    ],
  },
  {
    version: 9,
    name: 'citation style',
    statements: [
      // How answers cite documents: inline markers or only the list beside the answer; null: inline (the default).
      "alter table control.projects add column citations text check (citations in ('inline', 'list'))",
    ],
  },
  {
    version: 10,
    name: 'document processor',
    statements: [
      // How documents are cut into chunks (chunk_tokens, overlap_tokens); null: the runtime's default.
      'alter table control.projects add column processor jsonb',
    ],
  },
  {
    version: 11,
    name: 'automatic document context',
    statements: [
      // Whether each turn starts with the passages of the documents the person may read that best match their
      // message (docs/decisions/0045); false: the agent searches when it decides to.
      'alter table control.projects add column auto_context boolean not null default false',
    ],
  },
  {
    version: 12,
    name: 'rerank model',
    statements: [
      // The project's rerank model ({provider_id, model}), tried with a real call before it is stored; null: none.
      'alter table control.projects add column rerank jsonb',
    ],
  },
  {
    version: 13,
    name: 'project vector index',
    statements: [
      // The project's own Pinecone index ({provider, index_host, sealed_api_key, dimension}), tried with a real
      // call before it is stored, its key sealed; null: the deployment's index (docs/decisions/0047).
      'alter table control.projects add column vector_index jsonb',
    ],
  },
  {
    version: 14,
    name: 'webhook tools',
    statements: [
      // HTTPS endpoints a project publishes as tools (docs/decisions/0052). Each has its own signing secret,
      // sealed; after a rotation the replaced one still signs until previous_secret_until.
      `create table control.webhook_tools (
        id uuid primary key,
        project_id uuid not null references control.projects (id) on delete cascade,
        name text not null,
        description text not null,
        parameters jsonb not null,
        url text not null,
        requires_approval boolean not null,
        secret text not null,
        previous_secret text,
        previous_secret_until timestamptz,
        created_at timestamptz not null default now(),
        updated_at timestamptz not null default now(),
        rotated_at timestamptz,
        unique (project_id, name)
      )`,
    ],
  },
  {
    version: 15,
    name: 'mcp servers',
    statements: [
      // A project's MCP servers (docs/decisions/0053), reached over HTTP; their static headers sealed as one secret.
      `create table control.mcp_servers (
        id uuid primary key,
        project_id uuid not null references control.projects (id) on delete cascade,
        name text not null,
        url text not null,
        transport text not null,
        header_names jsonb not null,
        headers text,
        created_at timestamptz not null default now(),
        unique (project_id, name)
      )`,
    ],
  },
  {
    version: 16,
    name: 'web search engine',
    statements: [
      // The project's web search engine ({provider, base_url, sealed_api_key?}), tried with a real search before it is
      // stored; null: none (docs/decisions/0055).
      'alter table control.projects add column web_search jsonb',
    ],
  },
  {
    version: 17,
    name: 'subagents',
    statements: [
      // Where the project's subagents run ({models, max_concurrent}); null: the delegating turn's model, 4 at once.
      'alter table control.projects add column subagents jsonb',
    ],
  },
  {
    version: 18,
    name: 'webhook url',
    statements: [
      // Where the project's events go (docs/decisions/0059); null: nowhere but tasks' callback URLs.
      'alter table control.projects add column webhook_url text',
    ],
  },
  {
    version: 19,
    name: 'guardrails',
    statements: [
      // The project's input and output checks (docs/decisions/0064); null: none.
      'alter table control.projects add column guardrails jsonb',
    ],
  },
  {
    version: 20,
    name: 'audit log',
    statements: [
      // Every control-plane write and token mint (docs/decisions/0065): who, what, when, from where, how it went.
      `create table control.audit_log (
        id bigint generated always as identity primary key,
        project_id uuid,
        org_id uuid,
        at timestamptz not null default now(),
        actor text not null,
        action text not null,
        resource jsonb not null default '{}',
        outcome text not null,
        status integer,
        ip text,
        request_id text
      )`,
      'create index audit_log_project on control.audit_log (project_id, id desc)',
      // Append-only, enforced by the database: no entry is changed or removed.
      `create function control.audit_log_append_only() returns trigger language plpgsql as $$
      begin
        raise exception 'the audit log is append-only' using errcode = '42501';
      end
      $$`,
      'create trigger audit_log_append_only before update or delete on control.audit_log for each row execute function control.audit_log_append_only()',
    ],
  },
  {
    version: 21,
    name: 'audit forget',
    statements: [
      // A subject forgotten on the project's runtime (docs/decisions/0074): the one change the log allows replaces the
      // subject a mint's entry names with `forgotten`, in a transaction that says so; nothing else of an entry moves.
      `create or replace function control.audit_log_append_only() returns trigger language plpgsql as $$
      begin
        if tg_op = 'UPDATE' and current_setting('control.audit', true) = 'forget'
          and new.resource = (old.resource - 'subject') || '{"subject": "forgotten"}'::jsonb
          and new.id = old.id and new.project_id is not distinct from old.project_id and new.org_id is not distinct from old.org_id
          and new.at = old.at and new.actor = old.actor and new.action = old.action and new.outcome = old.outcome
          and new.status is not distinct from old.status and new.ip is not distinct from old.ip
          and new.request_id is not distinct from old.request_id then
          return new;
        end if;
        raise exception 'the audit log is append-only' using errcode = '42501';
      end
      $$`,
    ],
  },
  {
    version: 22,
    name: 'computer',
    statements: [
      // The project's computer settings (lib/src/computer.ts; docs/decisions/0080); null: the runtime's defaults.
      'alter table control.projects add column computer jsonb',
    ],
  },
  {
    version: 23,
    name: 'browser',
    statements: [
      // The project's browser hand-off settings (lib/src/browser.ts; docs/decisions/0090); null: the runtime's defaults.
      'alter table control.projects add column browser jsonb',
    ],
  },
];
