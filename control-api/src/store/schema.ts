// The control-api's tables as Kysely sees them (queried through `withSchema('control')`).
import type { ColumnType, Generated } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

export interface ControlSchema {
  accounts: { id: string; email: string; password_hash: string; created_at: Generated<Date> };
  orgs: { id: string; name: string; created_at: Generated<Date> };
  org_members: { org_id: string; account_id: string; role: 'owner' | 'member' };
  sessions: { id: string; token_hash: string; account_id: string; created_at: Generated<Date>; expires_at: Timestamp; revoked_at: Date | null };
  projects: { id: string; org_id: string; name: string; tenant_id: string; created_at: Generated<Date>; updated_at: Generated<Date> };
  project_keys: {
    id: string;
    project_id: string;
    name: string;
    scope: 'mint' | 'admin';
    key_hash: string;
    last_four: string;
    created_at: Generated<Date>;
    /** `account:<id>` or `key:<id>`: who made it. */
    created_by: string;
    revoked_at: Date | null;
  };
}
