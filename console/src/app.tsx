// The console's shell: the sign-in page until an account signs in, then its pages by path under /console
// (the control plane answers index.html for every one of them, so a link can be opened or reloaded).
import { Route, Router, Switch } from 'wouter';
import { SessionProvider, useSession } from './session.js';
import { SignInPage } from './pages/sign-in.js';
import { OrgsPage } from './pages/orgs.js';
import { ProjectPage } from './pages/project/project.js';
import { SignedInBar } from './components/signed-in-bar.js';

function Pages() {
  const { session } = useSession();
  if (!session) return <SignInPage />;
  return (
    <>
      <SignedInBar />
      <Switch>
        <Route path="/projects/:projectId/:section?">{(params) => <ProjectPage projectId={params.projectId} section={params.section} />}</Route>
        <Route>
          <OrgsPage />
        </Route>
      </Switch>
    </>
  );
}

export function App() {
  return (
    <SessionProvider>
      <Router base="/console">
        <Pages />
      </Router>
    </SessionProvider>
  );
}
