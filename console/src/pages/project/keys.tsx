// The project's keys: make one (the key is shown once, with a copy button), list them, revoke one after naming it.
import { useState, type FormEvent } from 'react';
import { ConfirmButton } from '../../components/confirm.js';
import { QueryState } from '../../components/query-state.js';
import { DataTable } from '../../components/data-table.js';
import { ErrorMessage } from '../../components/error-message.js';
import { ShownOnce } from '../../components/shown-once.js';
import { useCreateKey, useKeys, useRevokeKey, type ProjectKey, type ProjectKeyCreated } from '../../queries.js';

const keyName = (key: ProjectKey) => `key ${key.name || '(unnamed)'} (…${key.last_four})`;

function NewKeyForm({ projectId, onMade }: { projectId: string; onMade: (key: ProjectKeyCreated) => void }) {
  const create = useCreateKey(projectId);
  const [name, setName] = useState('');
  const [scope, setScope] = useState<'mint' | 'admin'>('mint');
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    create.mutate(
      { name: name.trim(), scope },
      {
        onSuccess: (made) => {
          setName('');
          onMade(made);
        },
      },
    );
  }
  return (
    <form onSubmit={submit} aria-labelledby="new-key-heading">
      <h2 id="new-key-heading">Make a key</h2>
      <label htmlFor="key-name">Name</label>
      <input id="key-name" value={name} onChange={(event) => setName(event.target.value)} maxLength={200} placeholder="backend" />
      <fieldset>
        <legend>Scope</legend>
        <label className="choice">
          <input type="radio" name="scope" value="mint" checked={scope === 'mint'} onChange={() => setScope('mint')} /> mint: mints end-user tokens and reads the
          ceiling (for your server)
        </label>
        <label className="choice">
          <input type="radio" name="scope" value="admin" checked={scope === 'admin'} onChange={() => setScope('admin')} /> admin: every control-plane call
        </label>
      </fieldset>
      <button type="submit" disabled={create.isPending}>
        Make key
      </button>
      <ErrorMessage error={create.error} />
    </form>
  );
}

export function KeysSection({ projectId }: { projectId: string }) {
  const keys = useKeys(projectId);
  const revoke = useRevokeKey(projectId);
  const [made, setMade] = useState<ProjectKeyCreated | null>(null);
  return (
    <>
      {made ? <ShownOnce label={`Key ${made.name || made.last_four}`} value={made.key} onDismiss={() => setMade(null)} /> : <NewKeyForm projectId={projectId} onMade={setMade} />}
      <section aria-labelledby="keys-heading">
        <h2 id="keys-heading">Keys</h2>
        <QueryState query={keys} what="keys" />
        {keys.data?.length === 0 ? <p>No keys yet.</p> : null}
        {keys.data && keys.data.length > 0 ? (
          <DataTable columns={['Name', 'Ends with', 'Scope', 'Made', 'State']} caption="The project's keys">
            {keys.data.map((key) => (
              <tr key={key.id}>
                <td>{key.name || '(unnamed)'}</td>
                <td>
                  <code>…{key.last_four}</code>
                </td>
                <td>{key.scope}</td>
                <td>{new Date(key.created_at).toLocaleString()}</td>
                <td>
                  {key.revoked_at ? (
                    `revoked ${new Date(key.revoked_at).toLocaleString()}`
                  ) : (
                    <ConfirmButton label="Revoke" target={keyName(key)} consequence="Calls made with it are refused from now on; this cannot be undone." onConfirm={() => revoke.mutateAsync(key.id)} />
                  )}
                </td>
              </tr>
            ))}
          </DataTable>
        ) : null}
      </section>
    </>
  );
}
