// Sign in with an account's email and password.
import { useState, type FormEvent } from 'react';
import { useSession } from '../session.js';
import { ErrorMessage } from '../components/error-message.js';

export function SignInPage() {
  const { signIn } = useSession();
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<unknown>(null);

  async function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    setPending(true);
    setError(null);
    try {
      await signIn(String(form.get('email')), String(form.get('password')));
    } catch (failure) {
      setError(failure);
      setPending(false);
    }
  }

  return (
    <main className="narrow">
      <h1>Sign in to agentplane</h1>
      <form onSubmit={submit} aria-describedby="sign-in-note">
        <label htmlFor="email">Email</label>
        <input id="email" name="email" type="email" autoComplete="username" required autoFocus />
        <label htmlFor="password">Password</label>
        <input id="password" name="password" type="password" autoComplete="current-password" required />
        <button type="submit" disabled={pending}>
          {pending ? 'Signing in…' : 'Sign in'}
        </button>
        <ErrorMessage error={error} />
      </form>
      <p id="sign-in-note" className="note">
        The session is kept in this tab only: reloading the page signs you out.
      </p>
    </main>
  );
}
