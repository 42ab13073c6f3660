// What a query shows before its data: a line while it loads (naming what), and the failure in the service's words.
import { ErrorMessage } from './error-message.js';

export function QueryState({ query, what }: { query: { isPending: boolean; error: unknown }; what: string }) {
  return (
    <>
      {query.isPending ? <p>Loading {what}…</p> : null}
      <ErrorMessage error={query.error} />
    </>
  );
}
