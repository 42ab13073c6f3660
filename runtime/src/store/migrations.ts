// The runtime's schema, in order. Released migrations are never edited: add a new one.
import type { Migration } from '../../../lib/src/db/migrate.js';

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
];
