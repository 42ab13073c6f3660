// The project corpus: add a document (text typed or pasted, or a text file read in the browser and sent inline: the
// console's policy lets it call its own origin only, so a file cannot be PUT to the store's upload URL from here),
// list the documents with their status (read again while any is being read), read one again (after the embedding
// model changed, or a failure), delete one after naming it.
import { useState, type FormEvent } from 'react';
import { ConfirmButton } from '../../components/confirm.js';
import { QueryState } from '../../components/query-state.js';
import { DataTable } from '../../components/data-table.js';
import { ErrorMessage } from '../../components/error-message.js';
import { DOCUMENT_PAGE, useAddDocument, useDeleteDocument, useDocuments, useReingestDocument, type CorpusDocument } from './documents-queries.js';

/** The media types a document sent inline may have. */
const TEXT_TYPES = ['text/plain', 'text/markdown', 'text/html', 'text/csv', 'application/json'] as const;
type TextType = (typeof TEXT_TYPES)[number];

/** A chosen file's media type, when it is one the corpus takes inline (browsers leave Markdown's empty). */
function textTypeOf(file: File): TextType | null {
  if ((TEXT_TYPES as readonly string[]).includes(file.type)) return file.type as TextType;
  if (/\.(md|markdown)$/i.test(file.name)) return 'text/markdown';
  if (file.type === '' && /\.txt$/i.test(file.name)) return 'text/plain';
  return null;
}

const documentName = (document: CorpusDocument) => `document ${document.title || document.filename || document.id}`;

function NewDocumentForm({ projectId }: { projectId: string }) {
  const add = useAddDocument(projectId);
  const [title, setTitle] = useState('');
  const [text, setText] = useState('');
  const [contentType, setContentType] = useState<TextType>('text/plain');
  const [filename, setFilename] = useState<string | null>(null);
  const [roles, setRoles] = useState('');
  const [fileProblem, setFileProblem] = useState<string | null>(null);
  const [added, setAdded] = useState<string | null>(null);

  async function choose(file: File | undefined) {
    setFileProblem(null);
    if (!file) return;
    const type = textTypeOf(file);
    if (!type) {
      setFileProblem(`${file.name}: the console sends text files only (plain text, Markdown, HTML, CSV or JSON); upload a PDF or DOCX through the API.`);
      return;
    }
    setContentType(type);
    setFilename(file.name);
    if (title === '') setTitle(file.name);
    setText(await file.text());
  }

  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const allowed = roles.split(',').map((role) => role.trim()).filter(Boolean);
    add.mutate(
      { text, content_type: contentType, ...(title.trim() ? { title: title.trim() } : {}), ...(filename ? { filename } : {}), ...(allowed.length ? { allowed_roles: allowed } : {}) },
      {
        onSuccess: (made) => {
          setAdded(`Added ${made.document.title}; it is read next.`);
          setTitle('');
          setText('');
          setFilename(null);
          setRoles('');
        },
      },
    );
  }

  return (
    <form onSubmit={submit} aria-labelledby="new-document-heading">
      <h2 id="new-document-heading">Add a document</h2>
      <label htmlFor="document-file">Text file (optional: fills the text below)</label>
      <input id="document-file" type="file" accept=".txt,.md,.markdown,.html,.htm,.csv,.json,text/*,application/json" onChange={(event) => void choose(event.target.files?.[0])} />
      <ErrorMessage error={fileProblem} />
      <label htmlFor="document-title">Title</label>
      <input id="document-title" value={title} onChange={(event) => setTitle(event.target.value)} maxLength={500} placeholder="Refund policy" />
      <label htmlFor="document-type">Format</label>
      <select id="document-type" value={contentType} onChange={(event) => setContentType(event.target.value as TextType)}>
        {TEXT_TYPES.map((type) => (
          <option key={type}>{type}</option>
        ))}
      </select>
      <label htmlFor="document-text">Text</label>
      <textarea id="document-text" value={text} onChange={(event) => setText(event.target.value)} rows={8} required />
      <label htmlFor="document-roles">Only for roles (comma-separated; empty: every end-user)</label>
      <input id="document-roles" value={roles} onChange={(event) => setRoles(event.target.value)} placeholder="support, sales" />
      <button type="submit" disabled={add.isPending || text === ''}>
        Add document
      </button>
      <ErrorMessage error={add.error} />
      <p role="status" className="note">
        {added ?? ''}
      </p>
    </form>
  );
}

function Status({ document }: { document: CorpusDocument }) {
  const attempts = document.ingest_attempts > 1 ? ` (attempt ${document.ingest_attempts})` : '';
  return (
    <>
      <span className={document.status === 'failed' ? 'error' : document.status === 'ready' ? 'ok' : undefined}>{document.status}</span>
      {attempts}
      {document.failure ? <span className="note"> ({document.failure})</span> : null}
    </>
  );
}

const sizeOf = (bytes: number | null) => (bytes === null ? '' : bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(1)} KiB`);

export function DocumentsSection({ projectId }: { projectId: string }) {
  const [offset, setOffset] = useState(0);
  const documents = useDocuments(projectId, offset);
  const reingest = useReingestDocument(projectId);
  const remove = useDeleteDocument(projectId);
  const page = documents.data;
  return (
    <>
      <NewDocumentForm projectId={projectId} />
      <section aria-labelledby="documents-heading">
        <h2 id="documents-heading">Corpus</h2>
        <p className="note">Every end-user of the project may search these (unless limited to roles). The list is read again every few seconds while a document is being read.</p>
        <QueryState query={documents} what="documents" />
        <ErrorMessage error={reingest.error} />
        {page?.documents.length === 0 && offset === 0 ? <p>No documents yet.</p> : null}
        {page && page.documents.length > 0 ? (
          <DataTable columns={['Title', 'Format', 'Size', 'Status', 'Chunks', 'Added', 'Actions']} caption="The project's documents, newest first">
            {page.documents.map((document) => (
              <tr key={document.id}>
                <td>
                  {document.title}
                  {document.allowed_roles.length ? <span className="note"> (roles: {document.allowed_roles.join(', ')})</span> : null}
                </td>
                <td>{document.content_type}</td>
                <td>{sizeOf(document.size_bytes)}</td>
                <td>
                  <Status document={document} />
                </td>
                <td>{document.chunk_count}</td>
                <td>{new Date(document.created_at).toLocaleString()}</td>
                <td>
                  {document.status === 'ready' || document.status === 'failed' ? (
                    <>
                      <button type="button" className="secondary" aria-label={`Read again ${documentName(document)}`} disabled={reingest.isPending} onClick={() => reingest.mutate(document.id)}>
                        Read again
                      </button>{' '}
                    </>
                  ) : null}
                  <ConfirmButton
                    label="Delete"
                    target={documentName(document)}
                    consequence="Its text, chunks and vectors are removed; the agent no longer finds it. This cannot be undone."
                    onConfirm={() => remove.mutateAsync(document.id)}
                  />
                </td>
              </tr>
            ))}
          </DataTable>
        ) : null}
        {page && (offset > 0 || page.has_more) ? (
          <div className="actions">
            <button type="button" className="secondary" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - DOCUMENT_PAGE))}>
              Newer documents
            </button>
            <button type="button" className="secondary" disabled={!page.has_more || page.next_offset === null} onClick={() => setOffset(page.next_offset ?? offset)}>
              Older documents
            </button>
          </div>
        ) : null}
      </section>
    </>
  );
}
