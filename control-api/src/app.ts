// The control-api's composition root. So far it serves the operational routes and its OpenAPI document;
// accounts, projects, keys and minting arrive with the identity work (issue 3).
import type { Express } from 'express';
import { createHttpApp, type OpenApiDocument } from '../../lib/src/http/app.js';
import { Lifecycle } from '../../lib/src/http/lifecycle.js';
import type { ReadinessCheck } from '../../lib/src/http/operational.js';
import type { Logger } from '../../lib/src/logging.js';
import type { ControlApiConfig } from './config.js';

export interface ControlApi {
  app: Express;
  openapi: OpenApiDocument;
  lifecycle: Lifecycle;
  close(): Promise<void>;
}

export interface ControlApiDeps {
  config: ControlApiConfig;
  logger: Logger;
  lifecycle?: Lifecycle;
  /** Dependencies whose answer decides readiness (in the all-in-one: the in-process runtime it provisions into). */
  readiness?: Record<string, ReadinessCheck>;
}

export async function createControlApi({ config, logger, lifecycle = new Lifecycle(), readiness = {} }: ControlApiDeps): Promise<ControlApi> {
  const { app, openapi } = createHttpApp({
    program: 'control-api',
    title: 'agentplane control plane',
    description: 'The control plane: projects, project keys (X-API-Key, `pk_`), end-user token minting and project configuration.',
    logger,
    lifecycle,
    bodyLimitBytes: config.bodyLimitBytes,
    routes: [],
    guards: {},
    securitySchemes: {
      apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'A project key (`pk_...`), scope mint or admin' },
    },
    readiness,
  });
  return { app, openapi, lifecycle, close: async () => {} };
}
