// The console's shell: the sign-in page until an account signs in, then its orgs and projects.
import { SessionProvider, useSession } from './session.js';
import { SignInPage } from './pages/sign-in.js';
import { OrgsPage } from './pages/orgs.js';

function Pages() {
  const { session } = useSession();
  return session ? <OrgsPage /> : <SignInPage />;
}

export function App() {
  return (
    <SessionProvider>
      <Pages />
    </SessionProvider>
  );
}
