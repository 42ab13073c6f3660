// The control-api's composition root: its store (schema `control`, in its own database or, in the all-in-one,
// beside the runtime's), sign-in counters, the first owner, the providers' upstream client, and the routes.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Express } from 'express';
import type { Kysely } from 'kysely';
import { loadMasterKey, loadOrCreateSecret } from '@agentplane/lib/crypto/local-secrets';
import { SecretBox } from '@agentplane/lib/crypto/secret-box';
import { openDatabase, type Database } from '@agentplane/lib/db/database';
import { migrate } from '@agentplane/lib/db/migrate';
import { createEventBus, type EventBus } from '@agentplane/lib/events';
import { createHttpApp, type OpenApiDocument } from '@agentplane/lib/http/app';
import { Lifecycle } from '@agentplane/lib/http/lifecycle';
import type { ReadinessCheck } from '@agentplane/lib/http/operational';
import type { Logger } from '@agentplane/lib/logging';
import { ConnectionPool } from '@agentplane/lib/net/connection-pool';
import { cachedResolver } from '@agentplane/lib/net/resolver-cache';
import { accountRoutes, sessionGuard } from './accounts/routes.js';
import { AccountService } from './accounts/service.js';
import type { ControlApiConfig } from './config.js';
import { builtConsoleDir, consoleRouter } from './console/serve.js';
import { dataPlaneProxy, type ProjectDataPlane } from './console/data-proxy.js';
import { accessTokenVerifier } from '@agentplane/lib/tokens/verify';
import { trustedKeysOf } from '@agentplane/lib/tokens/keys';
import { issuerFor } from '@agentplane/lib/tokens/claims';
import { AppError } from '@agentplane/lib/errors';
import { assertProjectRoutesAuthorize, keyRoutes, projectCallerGuard } from './keys/routes.js';
import { ProjectKeyService } from './keys/service.js';
import { activityRoutes } from './activity/routes.js';
import { computerRoutes } from './computers/routes.js';
import { browserRoutes } from './browser/routes.js';
import { ProjectComputers } from './computers/service.js';
import { ControlAuditLog, controlAuditEntry } from './audit/log.js';
import { controlAuditRoutes } from './audit/routes.js';
import { ForgottenMints } from './audit/forgotten.js';
import { projectEventRoutes } from './events/routes.js';
import { ProjectEventsService } from './events/service.js';
import { ActivityService } from './activity/service.js';
import { knowledgeRoutes } from './knowledge/routes.js';
import { McpServerService } from './tools/mcp-servers.js';
import { mcpServerRoutes, skillRoutes, webhookToolRoutes, webSearchRoutes } from './tools/routes.js';
import { SkillRelay } from './tools/skills.js';
import { WebSearchService } from './tools/web-search.js';
import { WebhookToolService } from './tools/webhook-tools.js';
import { KnowledgeService } from './knowledge/service.js';
import { LocalProvisioner } from './provisioning/local.js';
import { OutboxRelay } from './provisioning/outbox.js';
import { ConfigurationDelivery } from './provisioning/receipts.js';
import type { Provisioner } from './provisioning/provisioner.js';
import { ProvisioningReport } from './provisioning/status.js';
import { providerRoutes } from './providers/routes.js';
import { ProviderService } from './providers/service.js';
import { PineconeUpstream } from './providers/vector-index.js';
import { OpenAIUpstream } from './providers/upstream.js';
import { ProjectReadiness } from './projects/readiness.js';
import { projectRoutes } from './projects/routes.js';
import { ProjectService } from './projects/service.js';
import { TokenMintService } from './tokens/service.js';
import { controlMigrations, controlSchema } from './store/migrations.js';
import type { ControlSchema } from './store/schema.js';

export interface ControlApi {
  app: Express;
  /** The OpenAPI document, made on first use. */
  openapi: () => OpenApiDocument;
  lifecycle: Lifecycle;
  accounts: AccountService;
  projects: ProjectService;
  keys: ProjectKeyService;
  providers: ProviderService;
  /** Delivers queued changes to the runtime; absent when no runtime is configured. */
  relay: OutboxRelay | undefined;
  database: Database<any>;
  /** Set when this start created the first owner with a generated password (kept in `ownerPasswordFile`). */
  generatedOwner: { email: string; passwordFile: string } | undefined;
  close(): Promise<void>;
}

export interface ControlApiDeps {
  config: ControlApiConfig;
  logger: Logger;
  lifecycle?: Lifecycle;
  /** A database to share (the all-in-one passes the runtime's); otherwise the config's is opened. */
  database?: Database<any>;
  /** How tenants reach a runtime; default: the config's (PROVISIONER), the local one only when RUNTIME_URL is set. */
  provisioner?: Provisioner;
  /** Dependencies whose answer decides readiness (in the all-in-one: the in-process runtime it provisions into). */
  readiness?: Record<string, ReadinessCheck>;
}

export const defaultOwnerEmail = 'owner@localhost';

export async function createControlApi({ config, logger, lifecycle = new Lifecycle(), database, provisioner, readiness = {} }: ControlApiDeps): Promise<ControlApi> {
  const ownDatabase = database ? undefined : await openDatabase(config.database);
  const store = (database ?? ownDatabase)!;
  const closers: (() => Promise<void>)[] = ownDatabase ? [() => ownDatabase.close()] : [];
  try {
    const migrated = await migrate(store.db, controlMigrations, { schema: controlSchema });
    if (migrated.applied.length > 0) logger.info({ applied: migrated.applied }, 'control database migrated');
    const db = store.db.withSchema(controlSchema) as unknown as Kysely<ControlSchema>;

    const events: EventBus = await createEventBus(config.events, { logger });
    closers.unshift(() => events.close());

    const accounts = new AccountService(db, events.counters, config.signIn, { ttlSeconds: config.sessionTtlSeconds });
    const secretBox = new SecretBox(loadMasterKey(config.masterKey, join(config.dataDir, 'secrets')));
    const reach = provisioner ?? (await configuredProvisioner(config));
    let relay: OutboxRelay | undefined;
    const delivery = new ConfigurationDelivery(() => relay, config.configurationWaitMs);
    const projects = new ProjectService(db, secretBox, {
      settle: (projectId, entryId, version) => delivery.settle(projectId, entryId, version),
      kick: () => relay?.kick(),
    });
    if (reach) {
      relay = new OutboxRelay(db, reach, (projectId) => projects.configurationDocument(projectId), logger, { resyncIntervalMs: config.configurationResyncMs });
      const stop = relay.start();
      closers.unshift(stop);
    } else {
      logger.warn('no runtime configured (RUNTIME_URL, RUNTIME_ADMIN_KEY): project changes are queued until one is');
    }
    const provisioning = new ProvisioningReport(db, reach);
    const keys = new ProjectKeyService(db, projects);
    const mint = new TokenMintService(projects, keys);
    // Provider URLs are the customer's: vetted when registered, and every connection to them pinned by the guard.
    // Plain http only where private addresses are allowed (a developer's own model server).
    // The same name is looked up when a provider is registered and again by its first call: one cached answer.
    const urlPolicy = { allowPrivate: config.allowPrivateUrls, allowHttp: config.allowPrivateUrls, resolve: cachedResolver() };
    const providerConnections = new ConnectionPool();
    closers.unshift(async () => providerConnections.close());
    const upstream = new OpenAIUpstream({ policy: urlPolicy, timeoutMs: config.providerTimeoutMs, connections: providerConnections });
    const indexUpstream = new PineconeUpstream({ policy: urlPolicy, timeoutMs: config.providerTimeoutMs, connections: providerConnections });
    const providers = new ProviderService(db, secretBox, projects, upstream, urlPolicy, indexUpstream);
    const generatedOwner = await ensureOwner(accounts, config);

    /** Where a project's data plane is, as the connect snippet hands it out, and its tenant; undefined for no such project. */
    // Kept a while: reading it asks the provisioner (on Kubernetes, the API server) and opens the project's keys, and a
    // playground turn is several calls. A project deleted meanwhile gains nothing: the data plane refuses its tenant's
    // tokens; keys rotated meanwhile are read again when a token does not verify (data-proxy.ts).
    const dataPlanes = new Map<string, ProjectDataPlane & { until: number }>();
    const dataPlaneOf = async (projectId: string, fresh = false): Promise<ProjectDataPlane | undefined> => {
      const known = dataPlanes.get(projectId);
      if (!fresh && known && known.until > Date.now()) return known;
      try {
        const project = await projects.get(projectId);
        const url = (await provisioning.of({ projectId, tenantId: project.tenant_id })).data_plane_url ?? config.dataPlaneUrl;
        const verify = accessTokenVerifier({ trustedKeys: trustedKeysOf(await projects.signingKeys(projectId)), issuer: issuerFor(projectId), tenantId: project.tenant_id });
        const entry = {
          url,
          tenantId: project.tenant_id,
          verifies: (token: string) => verify(token).then(() => true, () => false),
          until: Date.now() + 30_000,
        };
        if (dataPlanes.size >= 1000) dataPlanes.clear();
        dataPlanes.set(projectId, entry);
        return entry;
      } catch (error) {
        if (error instanceof AppError && error.kind === 'not_found') return undefined;
        throw error;
      }
    };
    const activity = new ActivityService(projects, reach);
    const computers = new ProjectComputers(projects, reach);
    const audit = new ControlAuditLog(db, logger);
    const forgottenMints = new ForgottenMints(db, projects, reach, logger);
    if (reach) closers.unshift(forgottenMints.start());
    const { app, openapi } = createHttpApp({
      program: 'control-api',
      title: 'agentplane control plane',
      description: 'The control plane: accounts and orgs (session), projects, project keys (X-API-Key, `pk_`), end-user token minting, providers (bring your own keys) and project configuration.',
      logger,
      lifecycle,
      bodyLimitBytes: config.bodyLimitBytes,
      // The web console: static files under their own Content-Security-Policy, beside the API it calls.
      // Its playground reaches a project's data plane through the control plane (decision 0085).
      rawRouters: [
        { path: '/console/data', router: dataPlaneProxy(dataPlaneOf) },
        { path: '/console', router: consoleRouter(config.consoleDir ?? builtConsoleDir()) },
      ],
      routes: delivery.carryReceipts(assertProjectRoutesAuthorize([
        ...accountRoutes(accounts, projects, activity),
        ...keyRoutes(keys),
        ...projectRoutes(projects, keys, mint, provisioning, new ProjectReadiness(projects, provisioning, activity), { control: config.publicUrl, data: config.dataPlaneUrl }, computers),
        ...providerRoutes(providers, keys),
        ...knowledgeRoutes(new KnowledgeService(projects, reach), keys),
        ...webhookToolRoutes(new WebhookToolService(db, secretBox, projects, urlPolicy, reach), keys),
        ...mcpServerRoutes(new McpServerService(db, secretBox, projects, urlPolicy), keys),
        ...webSearchRoutes(new WebSearchService(projects, secretBox, urlPolicy, config.providerTimeoutMs), keys),
        ...skillRoutes(new SkillRelay(projects, reach), keys),
        ...activityRoutes(activity, keys),
        ...computerRoutes(computers, keys),
        ...browserRoutes(projects, keys),
        ...projectEventRoutes(new ProjectEventsService(projects, reach, urlPolicy), keys),
        ...controlAuditRoutes(audit, keys, forgottenMints),
      ])),
      // Every answered write and mint joins the audit log, after its answer.
      onAnswered: (req, res) => {
        const entry = controlAuditEntry(req, res);
        if (entry) audit.recordLater(entry);
      },
      guards: { session: sessionGuard(accounts), apiKey: projectCallerGuard(accounts, keys) },
      securitySchemes: {
        session: { type: 'http', scheme: 'bearer', description: 'A session token from POST /api/auth/login (`ses_...`)' },
        apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'A project key (`pk_...`), scope mint or admin' },
      },
      readiness: { database: () => store.ping(), events: () => events.ping(), ...readiness },
    });

    return {
      app,
      openapi,
      lifecycle,
      accounts,
      projects,
      keys,
      providers,
      get relay() {
        return relay;
      },
      database: store,
      generatedOwner,
      async close() {
        for (const close of closers) await close().catch((err: unknown) => logger.error({ err }, 'error while closing'));
      },
    };
  } catch (error) {
    for (const close of closers) await close().catch(() => {});
    throw error;
  }
}

/** The Kubernetes client is imported only when chosen: it is the largest module graph a control-api could load. */
async function configuredProvisioner(config: ControlApiConfig): Promise<Provisioner | undefined> {
  const chosen = config.provisioner;
  if (chosen.kind === 'kubernetes') {
    const { KubernetesProvisioner, loadKubeConfig } = await import('./provisioning/kubernetes.js');
    return new KubernetesProvisioner({ kubeConfig: loadKubeConfig(chosen.kubeconfig), projectNamespacePrefix: chosen.projectNamespacePrefix });
  }
  return chosen.runtime ? new LocalProvisioner({ runtimeUrl: chosen.runtime.url, adminKey: chosen.runtime.adminKey }) : undefined;
}

/**
 * The first owner and org, on a start that finds no account: from AGENTPLANE_OWNER_EMAIL/PASSWORD, or with a
 * generated one-time password kept in the data dir (mode 0600) for the person who started it.
 */
async function ensureOwner(accounts: AccountService, config: ControlApiConfig): Promise<ControlApi['generatedOwner']> {
  if (await accounts.hasAccounts()) return undefined;
  if (config.owner.email && config.owner.password) {
    await accounts.createOwner(config.owner.email, config.owner.password, 'default');
    return undefined;
  }
  const passwordFile = join(config.dataDir, 'secrets', 'owner-password');
  const password = loadOrCreateSecret(passwordFile, () => randomBytes(18).toString('base64url')).value;
  await accounts.createOwner(defaultOwnerEmail, password, 'default');
  return { email: defaultOwnerEmail, passwordFile };
}
