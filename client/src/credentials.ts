// The data plane's credential: end-user tokens from a provider the application supplies (usually a call to its own
// server, which mints with the project key). SPEC.md Authentication 14: a token expiring within 60 seconds is
// replaced before sending; after a 401 the provider is asked once more. Concurrent requests share one refresh.

/** What a token provider returns: the token, and when it expires if the application knows (else read from the JWT). */
export type ProvidedToken = string | { token: string; expiresAt?: Date | number | undefined };

/** Called whenever the client needs a new end-user token. */
export type TokenProvider = () => Promise<ProvidedToken>;

/** SPEC.md Limits: client pre-expiry refresh margin. */
export const REFRESH_MARGIN_MS = 60_000;

interface HeldToken {
  token: string;
  /** Milliseconds since the epoch; undefined when neither the provider nor the token says. */
  expiresAt: number | undefined;
}

/** A JWT's `exp` in milliseconds, read from its payload without verifying it (the service verifies). */
export function expiryOfJwt(token: string): number | undefined {
  const payload = token.split('.')[1];
  if (payload === undefined) return undefined;
  try {
    const base64 = payload.replaceAll('-', '+').replaceAll('_', '/').padEnd(Math.ceil(payload.length / 4) * 4, '=');
    const claims: unknown = JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(base64), (c) => c.charCodeAt(0))));
    const exp = (claims as { exp?: unknown } | null)?.exp;
    return typeof exp === 'number' ? exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}

function held(provided: ProvidedToken): HeldToken {
  if (typeof provided === 'string') return { token: provided, expiresAt: expiryOfJwt(provided) };
  const { token, expiresAt } = provided;
  return { token, expiresAt: expiresAt === undefined ? expiryOfJwt(token) : expiresAt instanceof Date ? expiresAt.getTime() : expiresAt };
}

/** Holds the current end-user token and asks the provider for the next one, once for all who wait. */
export class TokenKeeper {
  #current: HeldToken | undefined;
  #refreshing: Promise<HeldToken> | undefined;

  constructor(
    private readonly provider: TokenProvider,
    private readonly now: () => number = Date.now,
  ) {}

  /** A token good for at least the refresh margin (the provider is asked when the held one is not). */
  async token(): Promise<string> {
    const current = this.#current;
    if (current && (current.expiresAt === undefined || current.expiresAt - this.now() > REFRESH_MARGIN_MS)) return current.token;
    return (await this.#refresh()).token;
  }

  /** After a 401 with `rejected`: a new token, unless another request already replaced it. */
  async replace(rejected: string): Promise<string> {
    if (this.#current && this.#current.token !== rejected) return this.#current.token;
    return (await this.#refresh()).token;
  }

  #refresh(): Promise<HeldToken> {
    this.#refreshing ??= this.provider()
      .then((provided) => (this.#current = held(provided)))
      .finally(() => (this.#refreshing = undefined));
    return this.#refreshing;
  }
}
