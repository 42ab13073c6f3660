// The control plane's client for a customer's server: every route typed from its OpenAPI document (`api`), called
// with a project key, and minting end-user tokens for the data plane.
import createClient, { type Client } from 'openapi-fetch';
import type { components, paths } from './generated/control-plane.js';
import type { ClientOptions, CallOptions } from './data-plane.js';
import { createTransport } from './transport.js';

export type MintRequest = components['schemas']['TokenRequest'];
export type MintResponse = components['schemas']['TokenResponse'];

export interface ControlPlaneOptions extends ClientOptions {
  /** A project key (`pk_...`): scope `mint` mints tokens, `admin` may call every project route. Server-side only. */
  projectKey: string;
}

export interface ControlPlaneClient {
  /** Every control-plane route, typed from its OpenAPI document (openapi-fetch); a failed call throws. */
  api: Client<paths>;
  /** POST /api/projects/{id}/token: an end-user token for the data plane. */
  mintToken(projectId: string, grant: MintRequest, options?: CallOptions): Promise<MintResponse>;
}

export function createControlPlaneClient(options: ControlPlaneOptions): ControlPlaneClient {
  const send = createTransport({
    ...options.retry,
    ...(options.fetch ? { fetch: options.fetch } : {}),
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    credential: { header: async () => ['X-API-Key', options.projectKey] },
  });
  const api = createClient<paths>({ baseUrl: options.baseUrl.replace(/\/+$/, ''), fetch: (request) => send(request) });
  return {
    api,
    async mintToken(projectId, grant, callOptions = {}) {
      const { data } = await api.POST('/api/projects/{id}/token', { params: { path: { id: projectId } }, body: grant, signal: callOptions.signal });
      return data as MintResponse;
    },
  };
}
