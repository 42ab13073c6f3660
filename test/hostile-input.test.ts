// Generated hostile input against every operation of both OpenAPI documents, as an outside prober sends it: for each
// operation a request that is otherwise valid (credential, known ids, a body built from the operation's own schema)
// carries one hostile value in one path parameter, query parameter or body field. No answer may be a 5xx, and a
// refused request changes no stored row of either plane. fast-check adds random text of every code point, lone
// surrogates included, to the fixed list of known-bad values.
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatWorld, MODEL, type ChatWorld } from './chat/fixture.js';
import { LocalProvisioner } from '@agentplane/control-api/provisioning/local';
import { startTestControl, type TestControl } from './harness/control.js';
import { eventually } from './harness/eventually.js';

const hostileFireKey = 'hostile-input-fire-key-'.padEnd(48, 'x');

type Json = Record<string, unknown>;
type Schema = Json & { $ref?: string };

interface Operation {
  method: string;
  path: string;
  operationId: string;
  security: string[];
  params: { name: string; in: 'path' | 'query'; schema: Schema }[];
  body?: Schema;
}

interface Plane {
  name: string;
  url: string;
  document: Json;
  db: Kysely<unknown>;
  credentials: Record<string, Record<string, string>>;
  pathValues: (operation: Operation, name: string) => string;
}

/** Values that have broken services like this one: text no store takes, odd numbers, odd dates, odd shapes. */
const hostileValues: unknown[] = [
  '\u0000',
  'x\u0000y',
  '\ud800',
  'x\udfffy',
  '%zz',
  '%E0%A4%A',
  '0000-01-01T00:00:00Z',
  '-271821-04-20T00:00:00Z',
  'x'.repeat(70_000),
  -1,
  0,
  1.5,
  2 ** 53 + 1,
  1e308,
  -1e308,
  true,
  null,
  [],
  {},
  [{ '\u0000': 1 }],
  // Nesting past what a recursive schema's stack holds.
  JSON.parse(`${'['.repeat(2_500)}${']'.repeat(2_500)}`),
  '../../../../etc/passwd',
  'http://169.254.169.254/latest/meta-data/',
  "'; DROP TABLE sessions; --",
  ...fc.sample(fc.string({ unit: 'binary', minLength: 1, maxLength: 12 }), { numRuns: 4, seed: 20261125 }),
];

/** Path segments a client can send: percent-encoded, so the router is what decodes them. */
const hostileSegments = ['%00', 'a%00b', '%zz', '%E0%A4%A', '%ED%A0%80', 'x'.repeat(3000), '..', '%2e%2e%2f', '-1', '0', '00000000-0000-0000-0000-000000000000'];

/** Query values as they travel: URL-encoded text. */
const hostileQueryValues = ['\u0000', 'x\u0000y', '\ud800', '0000-01-01T00:00:00Z', '-1', '99999999999999999999', '1e308', 'NaN', 'true', '', 'x'.repeat(5000)];

function resolve(document: Json, schema: Schema | undefined): Schema {
  if (!schema?.$ref) return schema ?? {};
  const name = schema.$ref.replace('#/components/schemas/', '');
  return resolve(document, ((document.components as Json).schemas as Json)[name] as Schema);
}

/** A value the schema accepts, as plain as possible: the base every hostile case changes one field of. */
function exampleOf(document: Json, input: Schema | undefined, depth = 0): unknown {
  const schema = resolve(document, input);
  if (depth > 6) return undefined;
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  // A typed schema's `allOf` only adds rules to its own (a string's second pattern): its example is of its own type.
  if (Array.isArray(schema.allOf) && schema.type === undefined) return Object.assign({}, ...schema.allOf.map((part) => exampleOf(document, part as Schema, depth + 1)));
  for (const key of ['anyOf', 'oneOf'] as const) {
    const options = schema[key] as Schema[] | undefined;
    if (options) return exampleOf(document, options.find((option) => resolve(document, option).type !== 'null') ?? options[0], depth + 1);
  }
  const type = Array.isArray(schema.type) ? (schema.type as string[]).find((t) => t !== 'null') : (schema.type as string | undefined);
  switch (type) {
    case 'object': {
      const properties = (schema.properties ?? {}) as Record<string, Schema>;
      const required = (schema.required ?? []) as string[];
      return Object.fromEntries(required.filter((name) => properties[name]).map((name) => [name, exampleOf(document, properties[name], depth + 1)]));
    }
    case 'array': {
      const min = Number(schema.minItems ?? 0);
      return Array.from({ length: min }, () => exampleOf(document, schema.items as Schema, depth + 1));
    }
    case 'integer':
    case 'number':
      return Number(schema.minimum ?? schema.exclusiveMinimum ?? 0) + (schema.exclusiveMinimum !== undefined ? 1 : 0) || 1;
    case 'boolean':
      return false;
    case 'string': {
      if (schema.format === 'uuid') return randomUUID();
      if (schema.format === 'date-time') return new Date().toISOString();
      if (schema.format === 'uri') return 'https://example.com/';
      if (schema.format === 'email') return 'someone@example.com';
      return 'x'.repeat(Math.max(1, Number(schema.minLength ?? 1)));
    }
    default:
      return undefined;
  }
}

function operationsOf(document: Json): Operation[] {
  const operations: Operation[] = [];
  for (const [path, item] of Object.entries(document.paths as Record<string, Record<string, Json>>)) {
    for (const [method, operation] of Object.entries(item)) {
      const params = ((operation.parameters ?? []) as { name: string; in: string; schema: Schema }[])
        .filter((p) => p.in === 'path' || p.in === 'query')
        .map((p) => ({ name: p.name, in: p.in as 'path' | 'query', schema: p.schema }));
      const body = ((operation.requestBody as Json | undefined)?.content as Record<string, { schema: Schema }> | undefined)?.['application/json']?.schema;
      const security = ((operation.security ?? []) as Record<string, unknown>[]).flatMap((entry) => Object.keys(entry));
      operations.push({ method: method.toUpperCase(), path, operationId: String(operation.operationId), security, params, ...(body ? { body } : {}) });
    }
  }
  return operations;
}

interface HostileCase {
  what: string;
  path: string;
  query: string;
  body?: unknown;
}

function casesOf(plane: Plane, operation: Operation): HostileCase[] {
  const base = () => ({
    segments: Object.fromEntries(operation.params.filter((p) => p.in === 'path').map((p) => [p.name, encodeURIComponent(plane.pathValues(operation, p.name))])),
    body: operation.body ? exampleOf(plane.document, operation.body) : undefined,
  });
  const render = (segments: Record<string, string>) => operation.path.replace(/\{([^}]+)\}/g, (_, name: string) => segments[name] ?? 'x');
  const cases: HostileCase[] = [];
  for (const param of operation.params) {
    if (param.in === 'path') {
      for (const segment of hostileSegments) {
        const { segments, body } = base();
        cases.push({ what: `path ${param.name}=${segment.slice(0, 20)}`, path: render({ ...segments, [param.name]: segment }), query: '', body });
      }
    } else {
      for (const value of hostileQueryValues) {
        const { segments, body } = base();
        cases.push({ what: `query ${param.name}=${JSON.stringify(value.slice(0, 20))}`, path: render(segments), query: `?${new URLSearchParams({ [param.name]: value })}`, body });
      }
    }
  }
  if (operation.body) {
    const fields = Object.keys((resolve(plane.document, operation.body).properties ?? {}) as Json);
    for (const field of fields) {
      for (const value of hostileValues) {
        const { segments, body } = base();
        cases.push({ what: `body ${field}=${JSON.stringify(value)?.slice(0, 24)}`, path: render(segments), query: '', body: { ...(body as Json), [field]: value } });
      }
    }
    // The whole body hostile: not an object at all, or nested beyond reason.
    const { segments } = base();
    for (const value of ['\u0000', [], 42, JSON.parse('['.repeat(2000) + ']'.repeat(2000))]) cases.push({ what: `body ${JSON.stringify(value).slice(0, 20)}`, path: render(segments), query: '', body: value });
  }
  return cases;
}

/** A digest of every row of every table the plane stores: equal digests, no stored change. */
async function fingerprint(db: Kysely<unknown>): Promise<string> {
  const tables = await sql<{ schema: string; name: string }>`
    select table_schema as schema, table_name as name from information_schema.tables
    where table_type = 'BASE TABLE' and table_schema not in ('pg_catalog', 'information_schema') order by 1, 2`.execute(db);
  const digests: string[] = [];
  for (const { schema, name } of tables.rows) {
    // The audit log records every write, refusals included, by design: what it holds is not a change a request made.
    if (`${schema}.${name}` === 'public.audit_log' || `${schema}.${name}` === 'control.audit_log') continue;
    // The outbox's delivery state (attempts, errors, delivered) is the relay's background work, not a change a
    // request stored; what a request enqueues (kind and payload) counts.
    const columns = `${schema}.${name}` === 'control.outbox' ? sql`(t.id, t.project_id, t.kind, t.payload)::text` : sql`t::text`;
    const row = await sql<{ digest: string | null }>`
      select md5(coalesce(string_agg(${columns}, '|' order by ${columns}), '')) as digest from ${sql.table(`${schema}.${name}`)} t`.execute(db);
    digests.push(`${schema}.${name}:${row.rows[0]?.digest}`);
  }
  return digests.join('\n');
}

/** The fingerprint once the plane is quiet: a turn accepted earlier may still write after its answer (a title). */
async function settledFingerprint(db: Kysely<unknown>): Promise<string> {
  let last = await fingerprint(db);
  for (let i = 0; i < 100; i++) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    const next = await fingerprint(db);
    if (next === last) return next;
    last = next;
  }
  throw new Error('the store never settled');
}

const writes = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

describe('hostile input on every operation of both planes', () => {
  let world: ChatWorld;
  let control: TestControl;
  const planes: Plane[] = [];

  beforeAll(async () => {
    // With a fire key, the route tasks' CronJobs fire through is open to the same hostile input.
    // No sandbox sweep: an idle pause on its own clock would read as a change a refused request stored.
    world = await chatWorld({ TASK_FIRE_KEY: hostileFireKey, COMPUTER_HOST: 'local', COMPUTER_SWEEP_MS: '3600000' });
    // Every capability a route checks, so hostile values reach each body's checks rather than stopping at 403.
    const documentCapabilities = ['documents:read', 'documents:write', 'memory', 'mcp:manage', 'plugins:write', 'todo', 'webhook_tools', 'web_search', 'subagents', 'tasks:read', 'tasks:write', 'triggers', 'computer'];
    const ceiling = world.tenant.configuration.ceiling;
    const widened = await world.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, ...documentCapabilities] } });
    if (widened.status !== 200) throw new Error(`widening the ceiling answered ${widened.status}`);
    const token = await world.token({
      roles: ['admin'],
      capabilities: ['chat', 'steer', 'ask_user', 'approvals', 'followups', 'recap', 'system_prompt', 'auto_title', ...documentCapabilities],
    });
    const turn = await world.chat(token, { message: 'hello', model: MODEL });
    if (turn.status !== 200) throw new Error(`the seeding turn answered ${turn.status}`);
    const { session_id: sessionId, run_id: runId } = (await turn.json()) as { session_id: string; run_id: string };
    // A document of this subject, and one still uploading in parts, for the document routes' ids.
    const document = await world.rt.endUser('/documents', token, { method: 'POST', body: JSON.stringify({ text: 'seed', title: 'seed' }) });
    if (document.status !== 201) throw new Error(`the seeding document answered ${document.status}`);
    const { id: documentId } = (await document.json()) as { id: string };
    const upload = await world.rt.endUser('/documents/presign-upload', token, {
      method: 'POST',
      body: JSON.stringify({ filename: 'seed.txt', content_type: 'text/plain', size: 6 * 1024 * 1024, multipart: true }),
    });
    if (upload.status !== 201) throw new Error(`the seeding upload answered ${upload.status}`);
    const { document: uploading } = (await upload.json()) as { document: { id: string } };
    const documentIdFor = (operation: Operation) => (/presign-parts|complete-upload|abort-upload/.test(operation.path) ? uploading.id : documentId);
    // A document of the tenant's corpus, for the admin corpus routes.
    const corpus = await world.rt.admin(`/tenants/${world.tenant.tenantId}/documents`, { method: 'POST', body: JSON.stringify({ text: 'seed corpus', title: 'corpus' }) });
    if (corpus.status !== 201) throw new Error(`the seeding corpus document answered ${corpus.status}`);
    const { document: corpusDocument } = (await corpus.json()) as { document: { id: string } };
    // An MCP server of this subject's and a skill package of the project's, for their routes' ids.
    const attached = await world.rt.endUser('/tools/mcp', token, { method: 'POST', body: JSON.stringify({ name: 'seeded', url: 'http://127.0.0.1:9/mcp' }) });
    if (attached.status !== 201) throw new Error(`the seeding MCP server answered ${attached.status}: ${await attached.text()}`);
    const { id: serverId } = (await attached.json()) as { id: string };
    const packageForm = new FormData();
    packageForm.append('file', new Blob(['---\nname: seeded\ndescription: A seeded skill\n---\nSteps.\n']), 'SKILL.md');
    const plugin = await world.rt.admin(`/tenants/${world.tenant.tenantId}/plugins`, { method: 'POST', body: packageForm });
    if (plugin.status !== 201) throw new Error(`the seeding skill package answered ${plugin.status}: ${await plugin.text()}`);
    const { id: pluginId } = (await plugin.json()) as { id: string };
    // A task of this subject's, an hour from firing, for the task routes' ids.
    const scheduled = await world.rt.endUser('/tasks', token, { method: 'POST', body: JSON.stringify({ prompt: 'seeded', interval_seconds: 3600 }) });
    if (scheduled.status !== 201) throw new Error(`the seeding task answered ${scheduled.status}: ${await scheduled.text()}`);
    const { id: taskId } = (await scheduled.json()) as { id: string };
    // A trigger of this subject's, for the trigger routes' ids; its URL's slug for the fire.
    const made = await world.rt.endUser('/triggers', token, { method: 'POST', body: JSON.stringify({ name: 'seeded', prompt: 'seeded' }) });
    if (made.status !== 201) throw new Error(`the seeding trigger answered ${made.status}: ${await made.text()}`);
    const { id: triggerId, url: triggerUrl } = (await made.json()) as { id: string; url: string };
    // A sandbox of this subject's, for the computer routes' ids.
    const box = await world.rt.endUser('/computers/sessions', token, { method: 'POST', body: JSON.stringify({ name: 'seeded' }) });
    if (box.status !== 201) throw new Error(`the seeding sandbox answered ${box.status}: ${await box.text()}`);
    const { id: sandboxId } = (await box.json()) as { id: string };
    const runtimeDocument = (await (await fetch(`${world.rt.url}/openapi.json`)).json()) as Json;
    planes.push({
      name: 'data plane',
      url: world.rt.url,
      document: runtimeDocument,
      db: world.rt.runtime.database.db as Kysely<unknown>,
      credentials: { bearer: { authorization: `Bearer ${token}` }, adminKey: { 'x-admin-key': world.rt.adminKey }, fireKey: { 'x-fire-key': hostileFireKey } },
      pathValues: (operation, name) =>
        ({
          tenant_id: world.tenant.tenantId,
          session_id: sessionId,
          id: operation.path.startsWith('/documents/') ? documentIdFor(operation) : operation.path.startsWith('/computers/') ? sandboxId : sessionId,
          sandbox_id: sandboxId,
          action: 'pause',
          run_id: runId,
          document_id: corpusDocument.id,
          server_id: serverId,
          plugin_id: pluginId,
          task_id: taskId,
          trigger_id: triggerId,
          // The fire names a trigger by its URL's slug, the removal by its id.
          trigger: operation.method === 'POST' ? triggerUrl.split('/').at(-1)! : triggerId,
        })[name] ?? randomUUID(),
    });

    // The control plane reaches the same runtime, so the routes it relays there (the corpus) are probed through.
    control = await startTestControl(
      // No periodic resync: it queues a push of every project on its own clock, which the digest would take for a
      // change made by whichever refused request it fell beside.
      { AGENTPLANE_OWNER_EMAIL: 'owner@example.com', AGENTPLANE_OWNER_PASSWORD: 'a long enough password', AGENTPLANE_ALLOW_PRIVATE_URLS: 'true', CONFIGURATION_RESYNC_MS: '0' },
      { provisioner: new LocalProvisioner({ runtimeUrl: world.rt.url, adminKey: world.rt.adminKey, timeoutMs: 5000 }) },
    );
    const { token: session, account } = await control.control.accounts.signIn('owner@example.com', 'a long enough password', 'test');
    const orgId = (await control.control.accounts.orgsOf(account.id))[0]!.id;
    const project = await control.control.projects.create(orgId, account.id, 'hostile');
    const adminKey = (await control.control.keys.create({ kind: 'account', accountId: account.id }, project.id, { scope: 'admin', name: 'admin' })).key;
    const projectDocuments = `${control.url}/api/projects/${project.id}/documents`;
    await eventually(async () => (await fetch(projectDocuments, { headers: { 'x-api-key': adminKey } })).status === 200, { what: "the project's tenant on the runtime" });
    const seeded = await fetch(projectDocuments, { method: 'POST', headers: { 'x-api-key': adminKey, 'content-type': 'application/json' }, body: JSON.stringify({ text: 'seed', title: 'seed' }) });
    if (seeded.status !== 201) throw new Error(`the seeding corpus document answered ${seeded.status}`);
    const { document: projectDocument } = (await seeded.json()) as { document: { id: string } };
    // A published tool, so the hostile bodies of its PATCH reach the body check rather than stopping at 404.
    const published = await fetch(`${control.url}/api/projects/${project.id}/webhook-tools`, {
      method: 'POST',
      headers: { 'x-api-key': adminKey, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'seeded_tool', description: 'A tool the probe changes', url: 'http://127.0.0.1:9/hook' }),
    });
    if (published.status !== 201) throw new Error(`the seeding webhook tool answered ${published.status}: ${await published.text()}`);
    const { id: toolId } = (await published.json()) as { id: string };
    planes.push({
      name: 'control plane',
      url: control.url,
      document: (await (await fetch(`${control.url}/openapi.json`)).json()) as Json,
      db: control.control.database.db as Kysely<unknown>,
      credentials: { apiKey: { 'x-api-key': adminKey }, session: { authorization: `Bearer ${session}` } },
      pathValues: (_operation, name) => ({ id: project.id, orgId, documentId: projectDocument.id, toolId, action: 'pause' })[name] ?? randomUUID(),
    });
  }, 120_000);

  afterAll(async () => {
    await world?.stop();
    await control?.stop();
  });

  it('covers both documents', () => {
    expect(planes.map((plane) => operationsOf(plane.document).length)).toEqual([expect.any(Number), expect.any(Number)]);
    for (const plane of planes) expect(operationsOf(plane.document).length, plane.name).toBeGreaterThan(20);
  });

  for (const planeName of ['data plane', 'control plane']) {
    it(`never answers 5xx and never stores a refused change on the ${planeName}`, async () => {
      const plane = planes.find((candidate) => candidate.name === planeName)!;
      const failures: string[] = [];
      let sent = 0;
      let known: string | undefined;
      for (const operation of operationsOf(plane.document)) {
        // Streams stay open by design; their hostile input is checked on the request that opens them.
        const credential = operation.security.map((scheme) => plane.credentials[scheme]).find(Boolean) ?? {};
        for (const hostile of casesOf(plane, operation)) {
          const write = writes.has(operation.method);
          // The digest after a refusal is the next case's starting point; after anything that succeeded (a turn
          // may still write its title after answering), wait for the store to settle first.
          if (write && known === undefined) known = await settledFingerprint(plane.db);
          const before = known;
          const controller = new AbortController();
          const timer = setTimeout(() => controller.abort(), 10_000);
          let status: number;
          try {
            const res = await fetch(`${plane.url}${hostile.path}${hostile.query}`, {
              method: operation.method,
              headers: { ...credential, ...(hostile.body === undefined ? {} : { 'content-type': 'application/json' }) },
              ...(hostile.body === undefined ? {} : { body: JSON.stringify(hostile.body) }),
              signal: controller.signal,
            });
            status = res.status;
            // An event stream that opened is a success; read no further.
            if (res.headers.get('content-type')?.startsWith('text/event-stream')) await res.body?.cancel();
            else await res.text();
          } catch (error) {
            failures.push(`${operation.method} ${operation.path} [${hostile.what}]: ${(error as Error).name}`);
            continue;
          } finally {
            clearTimeout(timer);
          }
          sent++;
          if (status >= 500) failures.push(`${operation.method} ${operation.path} [${hostile.what}]: ${status}`);
          if (status < 400) known = undefined;
          else if (write) {
            const after = await fingerprint(plane.db);
            if (after !== before) failures.push(`${operation.method} ${operation.path} [${hostile.what}]: refused with ${status} but stored a change`);
            known = after;
          }
        }
      }
      expect(failures).toEqual([]);
      expect(sent).toBeGreaterThan(500);
    }, 900_000);
  }
});
