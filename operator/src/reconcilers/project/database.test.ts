import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '@agentplane/lib/logging';
import { ProjectDatabases } from './database.js';

const databases = (adminUrl: string, databaseHost?: string) => new ProjectDatabases({ pool: {} as pg.Pool, adminUrl, databaseHost, logger: silentLogger() });

describe("a project's database URL", () => {
  it("names the project's own role, password and database on the admin's server, keeping its connection options", () => {
    const url = databases('postgres://admin:admin-pw@db.internal:5432/postgres?sslmode=require').connectionUrl('agentplane_acme', 'p@ss/word');
    expect(url).toBe('postgres://agentplane_acme:p%40ss%2Fword@db.internal:5432/agentplane_acme?sslmode=require');
    expect(ProjectDatabases.passwordOf(url)).toBe('p@ss/word');
  });

  it("never carries the admin's credentials, wherever the admin URL put them", () => {
    const url = databases('postgres://db.internal/postgres?user=admin&password=admin-pw&sslmode=verify-full&sslcert=/admin.crt&sslkey=/admin.key').connectionUrl('agentplane_acme', 'pw');
    expect(url).toBe('postgres://agentplane_acme:pw@db.internal/agentplane_acme?sslmode=verify-full');
    expect(url).not.toContain('admin');
  });

  it('points at the host runtimes reach when it differs from the operator’s', () => {
    expect(databases('postgres://admin:pw@127.0.0.1:5432/postgres', 'postgres.agentplane-system.svc:5432').connectionUrl('agentplane_acme', 'pw')).toBe(
      'postgres://agentplane_acme:pw@postgres.agentplane-system.svc:5432/agentplane_acme',
    );
  });
});
