// The bar above every signed-in page: who is signed in, the way back to the organizations, and signing out.
import { Link } from 'wouter';
import { useSession } from '../session.js';

export function SignedInBar() {
  const { session, signOut } = useSession();
  return (
    <header className="bar">
      <nav aria-label="Console">
        <Link href="/">Organizations</Link>
      </nav>
      <span>
        Signed in as <strong>{session?.email}</strong>{' '}
        <button type="button" onClick={() => void signOut()}>
          Sign out
        </button>
      </span>
    </header>
  );
}
