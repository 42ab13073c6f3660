// The signed-in session, held in memory only (docs/decisions/0084-console-credential.md): the session token lives in
// this module's React state and nowhere else, so a reload or a closed tab signs out. A call answered 401 (the session
// expired or was revoked) signs out too.
import { createContext, useCallback, useContext, useMemo, useRef, useState, type ReactNode } from 'react';
import { MutationCache, QueryCache, QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { AuthenticationError, createControlPlaneClient, signIn as signInWith, type ControlPlaneClient } from '@agentplane/client';

/** The control plane serves the console, so its API is on the page's own origin (and `connect-src 'self'` holds). */
const baseUrl = window.location.origin;

export interface Session {
  email: string;
  expiresAt: string;
  client: ControlPlaneClient;
}

interface SessionState {
  session: Session | null;
  signIn(email: string, password: string): Promise<void>;
  signOut(): Promise<void>;
}

const SessionContext = createContext<SessionState | null>(null);

export function SessionProvider({ children }: { children: ReactNode }) {
  const [session, setSession] = useState<Session | null>(null);
  const forget = useRef<() => void>(() => {});
  const [queryClient] = useState(() => {
    const onError = (error: unknown) => {
      if (error instanceof AuthenticationError) forget.current();
    };
    return new QueryClient({
      queryCache: new QueryCache({ onError }),
      mutationCache: new MutationCache({ onError }),
      defaultOptions: { queries: { retry: false, refetchOnWindowFocus: false } },
    });
  });
  forget.current = () => {
    setSession(null);
    queryClient.clear();
  };

  const signIn = useCallback(async (email: string, password: string) => {
    const answer = await signInWith({ baseUrl, email, password });
    setSession({ email: answer.account.email, expiresAt: answer.expires_at, client: createControlPlaneClient({ baseUrl, sessionToken: answer.token }) });
  }, []);

  const signOut = useCallback(async () => {
    try {
      await session?.client.api.POST('/api/auth/logout');
    } finally {
      // Signed out here whatever the service said: the token is dropped with the state.
      forget.current();
    }
  }, [session]);

  const state = useMemo(() => ({ session, signIn, signOut }), [session, signIn, signOut]);
  return (
    <SessionContext.Provider value={state}>
      <QueryClientProvider client={queryClient}>{children}</QueryClientProvider>
    </SessionContext.Provider>
  );
}

export function useSession(): SessionState {
  const state = useContext(SessionContext);
  if (!state) throw new Error('useSession outside SessionProvider');
  return state;
}

/** The signed-in client; only pages shown to a signed-in account call it. */
export function useControlPlane(): ControlPlaneClient {
  const { session } = useSession();
  if (!session) throw new Error('not signed in');
  return session.client;
}
