// The control plane's client: every route typed from its OpenAPI document (`api`). A customer's server calls it with
// a project key and mints end-user tokens for the data plane; a person signed in with an account (the console) calls
// the org routes with a session token from `signIn`.
import createClient, { type Client } from 'openapi-fetch';
import type { components, paths } from './generated/control-plane.js';
import type { ClientOptions, CallOptions } from './data-plane.js';
import { createTransport, type Credential } from './transport.js';

export type MintRequest = components['schemas']['TokenRequest'];
export type MintResponse = components['schemas']['TokenResponse'];
export type SignInResponse = components['schemas']['LoginResponse'];

export type ControlPlaneOptions = ClientOptions &
  (
    | {
        /** A project key (`pk_...`): scope `mint` mints tokens, `admin` may call every project route. Server-side only. */
        projectKey: string;
        sessionToken?: never;
      }
    | {
        /** An account's session token (`ses_...`, from `signIn`): the org routes (`/api/me`, `/api/orgs/...`). */
        sessionToken: string;
        projectKey?: never;
      }
  );

export interface ControlPlaneClient {
  /** Every control-plane route, typed from its OpenAPI document (openapi-fetch); a failed call throws. */
  api: Client<paths>;
  /** POST /api/projects/{id}/token: an end-user token for the data plane. */
  mintToken(projectId: string, grant: MintRequest, options?: CallOptions): Promise<MintResponse>;
}

function typedApi(options: ClientOptions, credential: Credential | undefined): Client<paths> {
  const send = createTransport({
    ...options.retry,
    ...(options.fetch ? { fetch: options.fetch } : {}),
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
    ...(credential ? { credential } : {}),
  });
  return createClient<paths>({ baseUrl: options.baseUrl.replace(/\/+$/, ''), fetch: (request) => send(request) });
}

export function createControlPlaneClient(options: ControlPlaneOptions): ControlPlaneClient {
  const header: [string, string] =
    options.projectKey !== undefined ? ['X-API-Key', options.projectKey] : ['Authorization', `Bearer ${options.sessionToken}`];
  const api = typedApi(options, { header: async () => header });
  return {
    api,
    async mintToken(projectId, grant, callOptions = {}) {
      const { data } = await api.POST('/api/projects/{id}/token', { params: { path: { id: projectId } }, body: grant, signal: callOptions.signal });
      return data as MintResponse;
    },
  };
}

/**
 * POST /api/auth/login: an account's session token and when it expires. Wrong email or password throws an
 * AuthenticationError (the same for both); too many failures a RateLimitError whose `detail` says when to try again.
 */
export async function signIn(options: ClientOptions & { email: string; password: string }, callOptions: CallOptions = {}): Promise<SignInResponse> {
  // A failed sign-in is not retried: a second try counts as a second failure against the account.
  const api = typedApi({ ...options, retry: { ...options.retry, maxRetries: 0 } }, undefined);
  const { data } = await api.POST('/api/auth/login', { body: { email: options.email, password: options.password }, signal: callOptions.signal });
  return data as SignInResponse;
}
