// The runtime's composition root: wires the configured adapters (relational store, event bus, blob store) to
// the services and routes of the data plane. Nothing below this file reads the environment.
import { hkdfSync, randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { Express } from 'express';
import { loadMasterKey, loadOrCreateSecret } from '@agentplane/lib/crypto/local-secrets';
import { newSecret, SecretBox } from '@agentplane/lib/crypto/secret-box';
import { openDatabase, type Database } from '@agentplane/lib/db/database';
import { migrate } from '@agentplane/lib/db/migrate';
import { createEventBus, type EventBus } from '@agentplane/lib/events';
import { createHttpApp, type OpenApiDocument } from '@agentplane/lib/http/app';
import { originAllowed } from '@agentplane/lib/http/cors';
import { Lifecycle } from '@agentplane/lib/http/lifecycle';
import type { Logger } from '@agentplane/lib/logging';
import { ConnectionPool } from '@agentplane/lib/net/connection-pool';
import { cachedResolver } from '@agentplane/lib/net/resolver-cache';
import { adminKeyGuard, fireKeyGuard } from './admin-auth.js';
import { EndUserAuthenticator } from './auth/authenticate.js';
import { bearerGuard, principalOf } from './auth/guard.js';
import { NarrowingKeyRings, registerNarrowingKeys } from './auth/narrowing-keys.js';
import { TokenNarrowingService } from './auth/narrowing.js';
import { capabilityRoutes, narrowingRoutes } from './auth/routes.js';
import { DraftKeeper } from './chat/drafts.js';
import { TurnEngine } from './chat/engine.js';
import { registerChat } from './chat/feature.js';
import { UsageLimiter } from './chat/limits.js';
import { chatRoutes } from './chat/routes.js';
import { RunStore } from './chat/runs.js';
import { ChatService } from './chat/service.js';
import { errorMessage } from '@agentplane/lib/errors';
import { SideGenerations } from './chat/side.js';
import { UsageRecorder } from './chat/usage.js';
import { TurnRecords } from './chat/turn-records.js';
import { registerDocuments } from './documents/feature.js';
import { createEmbedder } from './documents/ingest/embed.js';
import { createReranker } from './documents/rerank.js';
import { PgVectorIndex } from './documents/vectors/pgvector.js';
import { VectorIndexRouter } from './documents/vectors/router.js';
import { guardedFetcher } from '@agentplane/lib/net/guarded-fetch';
import { enqueueIngest, IngestWorker } from './documents/ingest/worker.js';
import { Retriever } from './documents/retrieval.js';
import { documentContext, documentSearchTool, SEARCH_DOCUMENTS } from './documents/search-tool.js';
import { EmbeddingSpaces } from './documents/spaces.js';
import { corpusRoutes } from './documents/corpus-routes.js';
import { documentRoutes } from './documents/routes.js';
import { registerTools } from './tools/feature.js';
import { registerTasks } from './tasks/feature.js';
import { registerDeliveries } from './deliveries/feature.js';
import { registerTriggers } from './triggers/feature.js';
import { TenantActivity } from './governance/activity.js';
import { activityRoutes } from './governance/routes.js';
import { UsageReports } from './governance/usage.js';
import { RuntimeMetrics } from './governance/metrics.js';
import { SubjectForgetter } from './governance/forget.js';
import { forgottenSubjectsOf, purgeForgotten } from './governance/forgotten.js';
import { forgottenSubjectRoutes } from './governance/forgotten-routes.js';
import { AuditLog } from './governance/audit.js';
import { auditedWrite, auditRoutes } from './governance/audit-routes.js';
import { moderator } from './chat/guardrails.js';
import { openAIClient } from '@agentplane/lib/models/openai-client';
import { sessionAdminRoutes } from './sessions/admin-routes.js';
import { triggerRoutes } from './triggers/routes.js';
import { TriggerService } from './triggers/service.js';
import { EventOutbox } from './deliveries/outbox.js';
import { deliveryRoutes } from './deliveries/routes.js';
import { TaskEvents } from './tasks/events.js';
import { taskFireRoutes, taskRoutes } from './tasks/routes.js';
import { kubernetesCronJobStore, TaskCronJobs } from './tasks/cronjobs.js';
import { TaskScheduler } from './tasks/scheduler.js';
import { unattendedRequest, type StartUnattended } from './chat/unattended.js';
import { TaskService } from './tasks/service.js';
import { ToolDeliveries } from './tools/deliveries.js';
import { toolRoutes } from './tools/routes.js';
import { ToolRegistry } from './chat/tool-registry.js';
import { registerComputers } from './computers/feature.js';
import { createSandboxHost } from './computers/index.js';
import { computerRoutes, sandboxAdminRoutes } from './computers/routes.js';
import { ComputerService } from './computers/service.js';
import { computerFamily } from './computers/tools.js';
import { createBrowserPool } from './browsers/feature.js';
import { browserFamily, screenshotUrlTool } from './browsers/tools.js';
import { BrowserHandoffs } from './browsers/handoff.js';
import { handoffRoutes } from './browsers/routes.js';
import { SessionTodos } from './sessions/todos.js';
import { Subagents } from './chat/subagents.js';
import { pluginRoutes } from './skills/routes.js';
import { SkillService } from './skills/service.js';
import { ToolCatalog } from './tools/catalog.js';
import { McpTools } from './tools/mcp.js';
import { UserMcpServers } from './tools/user-mcp.js';
import { WebTools } from './tools/web.js';
import { WebhookTools } from './tools/webhook-tools.js';
import { registerMemory } from './memory/feature.js';
import { memoryRoutes, wikiAdminRoutes } from './memory/routes.js';
import { MemoryService } from './memory/service.js';
import { memoryTools } from './memory/tools.js';
import { DocumentService } from './documents/service.js';
import { createOpenAIModelFactory } from './models/openai.js';
import type { ModelFactory } from './models/port.js';
import { Conversations } from './sessions/conversations.js';
import { sessionRoutes } from './sessions/routes.js';
import { SessionService } from './sessions/service.js';
import { BLOB_ROUTE_PATH, createBlobStore, createSignedBlobRouter, FsBlobStore, registerBlobs, type BlobStore } from './blob/index.js';
import { minAdminKeyLength, type RuntimeConfig } from './config.js';
import { Features } from './features.js';
import { runtimeMigrations } from './store/migrations.js';
import type { RuntimeSchema } from './store/schema.js';
import { configurationDigestKey, registerConfigurations, TenantConfigurationService } from './tenants/configuration.js';
import { TenantChangeNotices, TRUST_STAMP_MS } from './tenants/change-notices.js';
import { TenantEraser } from './tenants/erase.js';
import { tenantConfigurationRoutes, tenantRoutes } from './tenants/routes.js';
import { TenantService } from './tenants/service.js';

export interface Runtime {
  app: Express;
  /** The OpenAPI document, made on first use. */
  openapi: () => OpenApiDocument;
  lifecycle: Lifecycle;
  /** The key the tenant routes take in `X-Admin-Key`. */
  adminKey: string;
  /** Set when this start generated the admin key: the caller prints it once. */
  generatedAdminKey: boolean;
  /** Where a generated admin key is kept. */
  adminKeyFile: string;
  database: Database<RuntimeSchema>;
  events: EventBus;
  blobs: BlobStore;
  tenants: TenantService;
  configurations: TenantConfigurationService;
  /** Each tenant's runtime-held keys for narrowed tokens (docs/decisions/0016). */
  narrowingKeys: NarrowingKeyRings;
  eraser: TenantEraser;
  conversations: Conversations;
  sessions: SessionService;
  chat: ChatService;
  engine: TurnEngine;
  runs: RunStore;
  documents: DocumentService;
  computers: ComputerService;
  close(): Promise<void>;
}

export interface RuntimeDeps {
  config: RuntimeConfig;
  logger: Logger;
  lifecycle?: Lifecycle;
  /** Replaces the OpenAI-compatible model factory (benchmarks measure the engine against a model in process). */
  models?: ModelFactory;
  /** Ports of this service besides the runtime's own (the all-in-one's control plane) that a browser page may never reach. */
  ownPorts?: number[];
}

export async function createRuntime({ config, logger, lifecycle = new Lifecycle(), models, ownPorts }: RuntimeDeps): Promise<Runtime> {
  const secretsDir = join(config.dataDir, 'secrets');
  const adminKeyFile = join(secretsDir, 'runtime-admin-key');
  const adminKey = config.adminKey ? { value: config.adminKey, created: false } : loadOrCreateSecret(adminKeyFile, () => newSecret('ak_'));
  // A truncated or hand-edited key file must not turn into a short (or empty) key that a guess satisfies.
  if (adminKey.value.length < minAdminKeyLength) {
    throw new Error(`the admin key in ${adminKeyFile} is shorter than ${minAdminKeyLength} characters: delete the file to generate a new one`);
  }
  const masterKey = loadMasterKey(config.masterKey, secretsDir);
  const secretBox = new SecretBox(masterKey);

  const database = await openDatabase<RuntimeSchema>(config.database);
  const closers: (() => Promise<void>)[] = [() => database.close()];
  try {
    const migrated = await migrate(database.db, runtimeMigrations);
    if (migrated.applied.length > 0) logger.info({ applied: migrated.applied, version: migrated.version }, 'database migrated');

    const events = await createEventBus(
      config.events.kind === 'redis'
        ? { kind: 'redis', url: config.events.url, keyPrefix: config.events.keyPrefix, logRetentionSeconds: config.eventLogRetentionSeconds }
        : { kind: 'memory', logRetentionSeconds: config.eventLogRetentionSeconds, maxHeldBytes: config.eventLogMemoryBytes },
      { logger },
    );
    closers.unshift(() => events.close());

    const blobs = await createBlobStore(
      config.blobs.kind === 's3'
        ? { ...config.blobs }
        : {
            kind: 'fs',
            root: join(config.dataDir, 'runtime', 'blobs'),
            publicBaseUrl: config.publicUrl,
            // Derived, not stored: every replica with the same master key verifies the same URLs.
            signingSecret: Buffer.from(hkdfSync('sha256', masterKey, Buffer.alloc(0), 'agentplane signed blob urls', 32)).toString('base64url'),
            maxUploadBytes: config.blobMaxUploadBytes,
          },
    );

    closers.unshift(() => blobs.close());

    // Provider connections kept alive across calls and turns; closed after the features' shutdown ended the runs.
    const providerConnections = new ConnectionPool();
    closers.unshift(async () => providerConnections.close());

    // Features bring their erase steps, shutdown hooks and timers; the hooks run before the stores close.
    const eraser = new TenantEraser(database.db, logger);
    const forgetter = new SubjectForgetter(database.db, logger);
    const features = new Features(eraser, forgetter, logger);
    closers.unshift(() => features.shutdown());
    const tenants = new TenantService(database.db, secretBox, eraser);
    // A stamp is re-read only once the tenant tables may have changed: on the embedded store when this process wrote
    // to them; on a shared one when any replica says it did, or a second has passed (decision 0049).
    const tenantTables = ['tenants', 'tenant_configurations', 'forgotten_subjects'];
    const ownWrites = database.changesTo(tenantTables);
    let configurations: TenantConfigurationService;
    if (ownWrites) configurations = new TenantConfigurationService(database.db, secretBox, configurationDigestKey(masterKey), ownWrites);
    else {
      const notices = new TenantChangeNotices(events.pubsub, logger);
      database.onCommittedWrites(tenantTables, () => notices.announce());
      // Not awaited, like the run control channel: with Redis away at start the service still starts, and until it
      // listens each stamp is trusted for a second at most.
      let stopListening: (() => Promise<void>) | undefined;
      notices.listen().then(
        (stop) => {
          stopListening = stop;
        },
        (error: unknown) => logger.warn({ err: error }, `could not listen for tenant change notices; cached tenant stamps are trusted ${TRUST_STAMP_MS} ms at most`),
      );
      closers.unshift(async () => stopListening?.());
      configurations = new TenantConfigurationService(database.db, secretBox, configurationDigestKey(masterKey), () => notices.count(), TRUST_STAMP_MS);
    }
    const narrowingKeys = new NarrowingKeyRings(database.db, secretBox);
    registerConfigurations(features, configurations);
    registerNarrowingKeys(features, narrowingKeys);
    const authenticator = new EndUserAuthenticator(
      configurations,
      narrowingKeys,
      (tenantId) => tenants.routing(tenantId),
      (tenantId) => forgottenSubjectsOf(database.db, tenantId),
    );
    const narrowing = new TokenNarrowingService(narrowingKeys);

    const urlPolicy = { allowPrivate: config.allowPrivateUrls, allowHttp: config.allowPrivateUrls, resolve: cachedResolver() };
    const conversations = new Conversations(database.db, events.pubsub);
    const runs = new RunStore(database.db, `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`, config.runLeaseSeconds);
    const metrics = new RuntimeMetrics();
    const limiter = new UsageLimiter(
      events.counters,
      (code) => metrics.refused(code),
      (error) => logger.warn({ err: error }, 'a model call\'s reservation could not be settled; its estimate stays counted until its window ends'),
    );
    const usage = new UsageRecorder(database.db);
    const modelFactory = models ?? createOpenAIModelFactory({ urlPolicy, timeoutMs: config.providerTimeoutMs, connections: providerConnections });
    const sessions = new SessionService(database.db, events.pubsub, conversations, { logger });
    const side = new SideGenerations({ db: database.db, models: modelFactory, limiter, usage, tenants, sessions, logger });
    const records = new TurnRecords(database.db);
    const engine = new TurnEngine({
      events,
      conversations,
      runs,
      records,
      limiter,
      usage,
      models: modelFactory,
      lifecycle,
      logger,
      leaseSeconds: config.runLeaseSeconds,
      onTitleWanted: (turn) => side.titleAfterTurn(turn),
      // A crash loses at most about a second of an answer's text.
      drafts: new DraftKeeper(database.db, logger, config.draftSaveMs),
      observe: metrics,
      // A guardrail's moderation model, on the turn's provider through the openai SDK and the URL guard.
      moderate: moderator((target) => openAIClient(target, { policy: urlPolicy, timeoutMs: config.providerTimeoutMs, connections: providerConnections }), logger),
    });
    // Scheduled tasks: their erase step stops a tenant's schedules before the chat feature's step cancels its runs, so
    // they register first. The scheduler fires through the chat service (startUnattended, below) and starts once it
    // exists.
    // Events to the project's webhook URL and tasks' callbacks, at URLs its admin and end-users chose: through the
    // SSRF guard, on pooled connections, signed with the tenant's webhook secret.
    const outbox = new EventOutbox({
      db: database.db,
      logger,
      fetch: guardedFetcher({ ...urlPolicy, timeoutMs: 10_000 }, providerConnections),
      secretOf: async (tenantId) => (await tenants.webhookSecret(tenantId)).webhook_secret,
      owner: runs.owner,
      tickMs: config.deliveryTickMs,
      onAttempt: (outcome) => metrics.delivery(outcome),
    });
    registerDeliveries(features, outbox);
    const scheduler = new TaskScheduler({
      db: database.db,
      logger,
      owner: runs.owner,
      events: new TaskEvents(outbox),
      onFired: () => metrics.taskFired(),
      tickMs: config.schedulerTickMs,
      catchUpMs: config.schedulerCatchUpSeconds * 1000,
      start: (start) => startUnattended(start),
    });
    // On Kubernetes, tasks a CronJob can express get one (docs/decisions/0066); the scheduler fires the rest, and
    // their slots too when no Job did in time.
    const cronJobs = config.taskCronJobs
      ? new TaskCronJobs({ db: database.db, store: await kubernetesCronJobStore(config.taskCronJobs.namespace, config.taskCronJobs.kubeconfig), settings: config.taskCronJobs, logger })
      : undefined;
    // CronJobs turned off: every task is the database scheduler's again, fired on time (CronJobs left in the namespace
    // fire nothing without the fire key; decision 0066 says how to remove them).
    if (!cronJobs) await database.db.updateTable('tasks').set({ on_cronjob: false }).where('on_cronjob', '=', true).execute();
    registerTasks(features, database.db, scheduler, lifecycle.drainSignal, cronJobs);
    // Webhook triggers: their events are stopped before the runs are cancelled in an erase, so they register here too.
    const triggers = new TriggerService({
      db: database.db,
      secrets: secretBox,
      sessions,
      urlPolicy,
      counters: events.counters,
      outbox,
      start: (start) => startUnattended(start),
      logger,
      owner: runs.owner,
      publicUrl: config.publicUrl,
      metrics,
    });
    registerTriggers(features, database.db, triggers);
    // The embedded database is this process's alone (its data-dir lock says so).
    await registerChat(features, { engine, runs, events, logger, leaseSeconds: config.runLeaseSeconds, storeIsExclusive: database.driver === 'pglite' });
    registerBlobs(features, blobs);
    const embed = createEmbedder({ urlPolicy, timeoutMs: config.providerTimeoutMs, connections: providerConnections });
    // Pinecone's client is loaded only where an index needs it: the embedded default starts without it.
    const pinecone = () => import('./documents/vectors/pinecone.js');
    const spaces = new EmbeddingSpaces(database.db, secretBox);
    const vectors = new VectorIndexRouter({
      deployment:
        config.vectors.kind === 'pinecone'
          ? new (await pinecone()).PineconeIndex({ apiKey: config.vectors.apiKey, host: config.vectors.host })
          : new PgVectorIndex(database.db, logger),
      spaces,
      // A project's own index is at a host its admin chose: reached through the SSRF guard, like its providers.
      open: async (index) =>
        new (await pinecone()).PineconeIndex({ apiKey: index.apiKey, host: index.host, fetch: guardedFetcher({ ...urlPolicy, timeoutMs: config.providerTimeoutMs }, providerConnections) }),
    });
    const retriever = new Retriever(database.db, embed, vectors);
    const ingest = new IngestWorker({
      spaces,
      vectors,
      db: database.db,
      blobs,
      configurations,
      embed,
      logger,
      owner: runs.owner,
      leaseSeconds: config.ingestLeaseSeconds,
      concurrency: config.ingestConcurrency,
      maxAttempts: config.ingestMaxAttempts,
      retryBaseMs: config.ingestRetryBaseMs,
    });
    const documents = new DocumentService(database.db, blobs, {
      logger,
      vectors,
      retrieval: { retriever, spaces, rerank: createReranker({ urlPolicy, timeoutMs: config.providerTimeoutMs, connections: providerConnections }) },
      onUploaded: async (document) => {
        await enqueueIngest(database.db, document);
        ingest.wake();
      },
    });
    registerDocuments(features, documents, ingest, vectors, config.ingestPollMs);
    // A forgotten subject's own documents go one by one, their bytes and vectors with them (what could not be
    // removed is reported, and a second forget finishes it).
    features.forgetStep({
      name: 'documents',
      run: async (tenantId, subject) => {
        const owned = await database.db.selectFrom('documents').selectAll().where('tenant_id', '=', tenantId).where('owner', '=', subject).execute();
        for (const row of owned) await documents.delete(row);
        return { items: owned.length };
      },
    });
    const memory = new MemoryService(database.db, { logger, embed });
    registerMemory(features);
    const deliveries = new ToolDeliveries(database.db);
    registerTools(features, deliveries);
    // A handler is at a URL the project's admin chose: reached through the SSRF guard, on pooled connections.
    const webhookTools = new WebhookTools({
      fetch: guardedFetcher({ ...urlPolicy, timeoutMs: config.webhookToolTimeoutMs }, providerConnections),
      attemptMs: config.webhookToolTimeoutMs,
    });
    // MCP servers too are at URLs chosen by the project (or an end-user): every request through the guard. A
    // server's event stream is long-lived, so its own connections, not the pooled ones.
    const mcp = new McpTools({ fetch: guardedFetcher({ ...urlPolicy, timeoutMs: config.mcpTimeoutMs }), logger, callTimeoutMs: config.mcpTimeoutMs });
    features.onShutdown(() => mcp.close());
    const userMcp = new UserMcpServers(database.db, secretBox, urlPolicy);
    const todos = new SessionTodos(database.db);
    const tasks = new TaskService({
      db: database.db,
      sessions,
      urlPolicy,
      cancelRun: (principal, runId) => chat.cancel(principal, runId),
      changed: (taskId) => {
        scheduler.wake();
        cronJobs?.taskChanged(taskId);
      },
    });
    // Pages and search engines are at addresses the model or the project chose: through the guard, every redirect too.
    const web = new WebTools({
      fetch: guardedFetcher({ ...urlPolicy, timeoutMs: config.webFetchTimeoutMs }),
      searchFetch: guardedFetcher({ ...urlPolicy, timeoutMs: config.webFetchTimeoutMs }, providerConnections),
      readMs: config.webFetchTimeoutMs * 2,
    });
    features.eraseRows({ table: 'user_mcp_servers', purge: (trx, tenantId) => UserMcpServers.purge(trx, tenantId) });
    // The tools the service runs for a caller: a turn's, and what GET /tools lists. A project's MCP servers and the
    // caller's own are listed from their kept lists (a call to a server only when its list is stale).
    // Replicas tell each other of changed packages, so a removed skill is offered nowhere a moment later.
    const skills = new SkillService(database.db, secretBox, urlPolicy, Date.now, events.pubsub, logger);
    skills.listen().then(
      (stop) => features.onShutdown(stop),
      (error: unknown) => logger.warn({ err: error }, 'could not listen for skill changes; other replicas keep their lists 10 s at most'),
    );
    const subagents = new Subagents({ db: database.db, logger });
    features.eraseRows({ table: 'plugins', purge: (trx, tenantId) => SkillService.purge(trx, tenantId) });
    features.forgetRows({
      table: 'plugins',
      purge: async (trx, tenantId, subject) => Number((await trx.deleteFrom('plugins').where('tenant_id', '=', tenantId).where('owner', '=', subject).executeTakeFirst()).numDeletedRows),
    });
    // The audit log and the forget tombstones go with the tenant, last.
    // Answered writes' entries are spooled in the data dir until their batch is written: what a killed process held
    // is written now, before anything new is recorded.
    const auditSpool = join(config.dataDir, 'runtime', 'audit-spool');
    await AuditLog.replaySpool(database.db, auditSpool, logger);
    const audit = new AuditLog(database.db, logger, config.auditFlushMs, auditSpool);
    features.onShutdown(() => audit.flush());
    // Entries this process holds for the tenant are written before its rows go, so the purge takes them too.
    features.eraseStep({ name: 'audit_entries', phase: 'stop_work', run: async () => (await audit.flush(), {}) });
    // Entries this process still holds are written before a forget's transaction, so it renames them too.
    features.forgetStep({ name: 'audit_entries', run: async () => (await audit.flush(), {}) });
    features.eraseRows({ table: 'audit_log', purge: (trx, tenantId) => AuditLog.purge(trx, tenantId) });
    features.eraseRows({ table: 'forget_records', purge: (trx, tenantId) => SubjectForgetter.purge(trx, tenantId) });
    features.eraseRows({ table: 'forgotten_subjects', purge: (trx, tenantId) => purgeForgotten(trx, tenantId) });
    // Sandboxes: on this machine (bubblewrap) where it can; removed before a tenant's rows go.
    const computers = new ComputerService({
      db: database.db,
      host: await createSandboxHost({ kind: config.computerHost, kubernetes: config.computerKubernetes, root: join(config.dataDir, 'runtime', 'sandboxes'), hostUid: config.computerLocalUid, hostUidCount: config.computerLocalUids, pool: config.computerLocalPool, logger }),
      holder: runs.owner,
      logger,
      audit: (entries) => audit.recordLater(entries),
    });
    await registerComputers(features, { computers, configurations, logger, sweepMs: config.computerSweepMs, storeIsExclusive: database.driver === 'pglite' });
    // The agent's browser: Chromium on this machine, behind the egress guard, when it is installed.
    const browsers = createBrowserPool(features, config, logger, [config.port, ...(ownPorts ?? [])], sessions);
    const handoffs = new BrowserHandoffs({ db: database.db, pool: browsers, sessions, side, counters: events.counters, pubsub: events.pubsub, logger, callMs: config.browser.callMs });
    // The tools the service runs for a caller, family by family, in the order a turn offers them: a turn's, and what
    // GET /tools lists. A project's MCP servers and the caller's own are listed from their kept lists (a call to a
    // server only when its list is stale).
    const tools = new ToolRegistry();
    tools.register({
      name: 'skills',
      forTurn: async ({ principal, permission }) => {
        const loadSkill = skills.toolFor(principal.tenantId, await skills.skillsFor(principal, permission));
        return loadSkill ? [loadSkill] : [];
      },
    });
    tools.register({ name: 'documents', forTurn: ({ principal }) => [documentSearchTool(documents, principal)] });
    tools.register({ name: 'memory', forTurn: ({ principal }) => memoryTools(memory, principal) });
    tools.register({ name: 'todos', forTurn: ({ principal }) => [todos.tool(principal.tenantId)] });
    tools.register({ name: 'tasks', forTurn: ({ principal, permission, request }) => tasks.tools(principal, permission, request) });
    tools.register({ name: 'subagents', forTurn: ({ principal, permission, request }) => [subagents.tool(principal, permission, request)] });
    // `screenshot_url` is a web tool that pictures the page in the browser, so only where this runtime has one.
    tools.register({
      name: 'web',
      forTurn: (caller) => [...web.for(caller.principal.configuration.document.web_search), ...(browsers ? [screenshotUrlTool(browsers, caller, config.browser.callMs)] : [])],
    });
    tools.register({ name: 'webhooks', forTurn: ({ principal }) => webhookTools.for(principal) });
    tools.register(computerFamily(computers));
    tools.register(browserFamily(browsers, config.browser.callMs, config.browser.handoffMs));
    tools.register({
      name: 'mcp',
      forTurn: async ({ principal, permission }) => {
        // The project's servers, the packages' (their mcp.json, while skills are not declined) and the caller's own.
        const packaged = permission.switches.enable_plugins ? await skills.mcpServersFor(principal) : { project: [], personal: [] };
        const project = [...(principal.configuration.document.mcp_servers ?? []), ...packaged.project];
        const personal = [...(await userMcp.serversOf(principal)), ...packaged.personal];
        if (project.length === 0 && personal.length === 0) return [];
        // Each person calls through a session of their own (a server's per-session state is never shared).
        const caller = `${principal.tenantId}:${principal.claims.sub}`;
        return [...(await mcp.toolsOf(project, [], caller)), ...(await mcp.toolsOf(personal, ['mcp:manage'], caller))];
      },
    });
    const chat = new ChatService({
      db: database.db,
      events,
      conversations,
      sessions,
      runs,
      records,
      engine,
      limiter,
      logger,
      tools,
      documentContext: { tool: SEARCH_DOCUMENTS, find: (principal, message) => documentContext(documents, principal, message) },
    });
    subagents.attach(chat);
    // An unattended run (a task's fire, a trigger's event): a turn of its owner, acting with the claims their token
    // held when they made the task or trigger.
    const startUnattended: StartUnattended = async (start) => {
      const principal = await authenticator.actingAs(start.tenantId, start.actsAs, start.runId);
      // A ceiling narrowed since the task or trigger was made stops it: its capability is checked at every start.
      if (!principal.permission.has(start.needs)) return { started: false, error: `capability '${start.needs}' is no longer granted: the project's ceiling or the creator's grant does not hold it` };
      const outcome = await chat.start(principal, unattendedRequest(start) as Parameters<ChatService['start']>[1], undefined, { runId: start.runId });
      return outcome.kind === 'started' ? { started: true, sessionId: outcome.sessionId } : { started: false, error: errorMessage(outcome.error) };
    };
    scheduler.start();
    cronJobs?.start();
    triggers.start();

    const { app, openapi } = createHttpApp({
      program: 'runtime',
      title: 'agentplane data plane',
      description: 'The data plane: chat, documents, tools, tasks and sandboxes for end-users; tenant administration with X-Admin-Key.',
      logger,
      lifecycle,
      bodyLimitBytes: config.bodyLimitBytes,
      routes: [
        ...tenantRoutes(tenants),
        ...corpusRoutes(documents, tenants),
        ...wikiAdminRoutes(memory, tenants),
        ...forgottenSubjectRoutes(database.db, tenants),
        ...tenantConfigurationRoutes(configurations),
        ...capabilityRoutes({ sandboxHost: computers.host !== undefined, browser: browsers !== undefined }),
        ...narrowingRoutes(narrowing),
        ...chatRoutes(chat, side),
        ...sessionRoutes(sessions, todos, lifecycle.drainSignal),
        ...documentRoutes(documents),
        ...memoryRoutes(memory),
        ...pluginRoutes(skills, tenants),
        ...taskRoutes(tasks, tenants),
        ...taskFireRoutes(scheduler),
        ...deliveryRoutes(outbox, tenants),
        ...triggerRoutes(triggers),
        ...activityRoutes(new TenantActivity(database.db), tenants, configurations, new UsageReports(database.db)),
        ...sessionAdminRoutes(sessions, tenants, authenticator),
        ...auditRoutes(audit, forgetter),
        ...toolRoutes({ deliveries, tenants, catalog: new ToolCatalog({ tools, mcp, userMcp }), mcp, userMcp, urlPolicy }),
        ...computerRoutes(computers),
        ...handoffRoutes(handoffs),
        ...sandboxAdminRoutes(computers, tenants),
      ],
      guards: { adminKey: adminKeyGuard(adminKey.value), bearer: bearerGuard(authenticator), fireKey: fireKeyGuard(config.taskFireKey) },
      securitySchemes: {
        adminKey: { type: 'apiKey', in: 'header', name: 'X-Admin-Key', description: 'The runtime admin key (tenant routes)' },
        fireKey: { type: 'apiKey', in: 'header', name: 'X-Fire-Key', description: "The project's fire key, which its tasks' CronJobs present (Kubernetes only)" },
        bearer: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description:
            'An end-user token minted by the control plane for this tenant, or narrowed from one by POST /auth/token. A project key (pk_...) is refused here, in any header. ' +
            'From a browser on another origin, the project must list that origin (PUT /api/projects/:id/origins on the control plane): otherwise 403 `origin_not_allowed`',
        },
      },
      readiness: {
        database: () => database.ping(),
        events: () => events.ping(),
        blobs: () => blobs.ping(),
      },
      // End-user routes only: admin and operational routes stay closed to browsers on other origins.
      cors: {
        opens: (route) => route.security.includes('bearer'),
        anyAllows: async (origin) => originAllowed(await configurations.allowedOrigins(), origin),
        callerAllows: (origin, _req, res) => originAllowed(principalOf(res).configuration.document.origins, origin),
        // X-Run-Id names the run POST /chat/stream resumes with Last-Event-ID.
        allowHeaders: ['Authorization', 'Content-Type', 'Last-Event-ID', 'X-Run-Id', 'X-Request-Id'],
        exposeHeaders: ['X-Run-Id', 'X-Request-Id', 'Retry-After', 'WWW-Authenticate'],
        // Chromium keeps a preflight at most 2 hours; each request's answer is still checked against the live list.
        maxAgeSeconds: 7200,
      },
      // A trigger's event is signed, and keyed, over the bytes as they came.
      registries: [metrics.registry],
      // Every answered write joins the audit log, after its answer.
      onAnswered: (req, res) => {
        const entry = auditedWrite(req, res);
        if (entry) audit.recordLater([entry]);
      },
      keepsRawBody: (path) => /^\/triggers\/[^/]+\/?$/i.test(path),
      rawRouters: blobs instanceof FsBlobStore ? [{ path: BLOB_ROUTE_PATH, router: createSignedBlobRouter({ store: blobs }) }] : [],
    });

    return {
      app,
      openapi,
      lifecycle,
      adminKey: adminKey.value,
      generatedAdminKey: adminKey.created,
      adminKeyFile,
      database,
      events,
      blobs,
      tenants,
      configurations,
      narrowingKeys,
      eraser,
      conversations,
      sessions,
      chat,
      engine,
      runs,
      documents,
      computers,
      async close() {
        for (const close of closers) await close().catch((err: unknown) => logger.error({ err }, 'error while closing'));
      },
    };
  } catch (error) {
    for (const close of closers) await close().catch(() => {});
    throw error;
  }
}
