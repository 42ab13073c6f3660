// The project's control-plane audit log, newest first: every write and token mint, who, when, from where and how it
// went, filtered by action (such as `DELETE /api/projects/{id}/keys/{keyId}`) or actor (`account:<id>`, `key:<id>`).
import { useState, type FormEvent } from 'react';
import { QueryState } from '../../components/query-state.js';
import { DataTable } from '../../components/data-table.js';
import { useAudit, type AuditFilter } from '../../queries.js';

export function AuditSection({ projectId }: { projectId: string }) {
  const [filter, setFilter] = useState<AuditFilter>({ action: '', actor: '' });
  const [pages, setPages] = useState<(string | undefined)[]>([undefined]);
  const audit = useAudit(projectId, filter, pages[pages.length - 1]);

  function filterBy(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    setFilter({ action: String(form.get('action') ?? '').trim(), actor: String(form.get('actor') ?? '').trim() });
    setPages([undefined]);
  }

  return (
    <>
      <form onSubmit={filterBy} aria-label="Filter the audit log">
        <label htmlFor="audit-action">Action</label>
        <input id="audit-action" name="action" list="audit-actions" defaultValue={filter.action} placeholder="DELETE /api/projects/{id}/keys/{keyId}" />
        <datalist id="audit-actions">
          {[...new Set(audit.data?.entries.map((entry) => entry.action) ?? [])].map((action) => (
            <option key={action} value={action} />
          ))}
        </datalist>
        <label htmlFor="audit-actor">Actor</label>
        <input id="audit-actor" name="actor" defaultValue={filter.actor} placeholder="account:<id> or key:<id>" />
        <button type="submit">Filter</button>
      </form>
      <section aria-labelledby="audit-heading">
        <h2 id="audit-heading">Entries</h2>
        <QueryState query={audit} what="the audit log" />
        {audit.data?.entries.length === 0 ? <p>No entries{filter.action || filter.actor ? ' match' : ' yet'}.</p> : null}
        {audit.data && audit.data.entries.length > 0 ? (
          <DataTable columns={['When', 'Action', 'Actor', 'Outcome', 'Resource', 'From']} caption="Audit entries, newest first">
            {audit.data.entries.map((entry) => (
              <tr key={entry.id}>
                <td>{new Date(entry.at).toLocaleString()}</td>
                <td>
                  <code>{entry.action}</code>
                </td>
                <td>
                  <code>{entry.actor}</code>
                </td>
                <td className={entry.outcome === 'ok' ? 'ok' : 'error'}>
                  {entry.outcome}
                  {entry.status === null ? '' : ` (${entry.status})`}
                </td>
                <td>
                  <code>{JSON.stringify(entry.resource)}</code>
                </td>
                <td>{entry.ip ?? ''}</td>
              </tr>
            ))}
          </DataTable>
        ) : null}
        <div className="actions">
          <button type="button" className="secondary" disabled={pages.length === 1} onClick={() => setPages((list) => list.slice(0, -1))}>
            Newer
          </button>
          <button type="button" className="secondary" disabled={!audit.data?.next_before} onClick={() => setPages((list) => [...list, audit.data!.next_before!])}>
            Older
          </button>
        </div>
      </section>
    </>
  );
}
