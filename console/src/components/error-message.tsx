// A failed call, said in the service's words (its `detail`), announced to screen readers.
import { AgentplaneError } from '@agentplane/client';

export function describeError(error: unknown): string {
  if (error instanceof AgentplaneError && typeof error.detail === 'string') return error.detail;
  return error instanceof Error ? error.message : String(error);
}

export function ErrorMessage({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p role="alert" className="error">
      {describeError(error)}
    </p>
  );
}
