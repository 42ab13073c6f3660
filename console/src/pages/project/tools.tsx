// The project's tools: webhook tools (published with a signing secret shown once, rotated with a new one shown once,
// removed after naming them), MCP servers (registered, then probed from the data plane to say which tools were found;
// the list says what the runtime found of each), and skill packages (uploaded as a file, listed, removed).
import { useState, type FormEvent } from 'react';
import { ConfirmButton } from '../../components/confirm.js';
import { DataTable } from '../../components/data-table.js';
import { describeError, ErrorMessage } from '../../components/error-message.js';
import { QueryState } from '../../components/query-state.js';
import { ShownOnce } from '../../components/shown-once.js';
import {
  useAddMcpServer,
  useCreateWebhookTool,
  useDeleteMcpServer,
  useDeleteSkills,
  useDeleteWebhookTool,
  useMcpServers,
  useProbeMcpServer,
  useRotateWebhookTool,
  useSkills,
  useToolListing,
  useUploadSkills,
  useWebhookTools,
  type McpProbeResult,
  type McpServer,
  type McpServerCreate,
  type SkillPackage,
  type ToolListing,
  type WebhookTool,
} from './tools-queries.js';

/** A secret the service answered once, with what the person should know about it. */
interface Secret {
  label: string;
  value: string;
  note: string;
}

const toolName = (tool: WebhookTool) => `webhook tool ${tool.name}`;

function NewWebhookToolForm({ projectId, onMade }: { projectId: string; onMade: (secret: Secret) => void }) {
  const create = useCreateWebhookTool(projectId);
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [url, setUrl] = useState('');
  const [parameters, setParameters] = useState('');
  const [requiresApproval, setRequiresApproval] = useState(false);
  const [problem, setProblem] = useState<string | null>(null);

  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    setProblem(null);
    let schema: Record<string, never> | undefined;
    if (parameters.trim() !== '') {
      try {
        schema = JSON.parse(parameters) as Record<string, never>;
      } catch {
        setProblem('Parameters must be JSON: an object schema such as {"type": "object", "properties": {...}}.');
        return;
      }
    }
    create.mutate(
      { name: name.trim(), description: description.trim(), url: url.trim(), requiresApproval, ...(schema ? { parameters: schema } : {}) },
      {
        onSuccess: (made) => {
          setName('');
          setDescription('');
          setUrl('');
          setParameters('');
          setRequiresApproval(false);
          onMade({ label: `Signing secret of ${made.name}`, value: made.secret, note: 'Verify the X-Service-Signature header of each call with it.' });
        },
      },
    );
  }

  return (
    <form onSubmit={submit} aria-labelledby="new-webhook-tool-heading">
      <h3 id="new-webhook-tool-heading">Publish a webhook tool</h3>
      <label htmlFor="webhook-tool-name">Name (what the model calls it)</label>
      <input id="webhook-tool-name" value={name} onChange={(event) => setName(event.target.value)} maxLength={64} pattern="[A-Za-z0-9_\-]{1,64}" placeholder="lookup_order" required />
      <label htmlFor="webhook-tool-description">Description (when to call it and what it returns)</label>
      <input id="webhook-tool-description" value={description} onChange={(event) => setDescription(event.target.value)} maxLength={4096} required />
      <label htmlFor="webhook-tool-url">Handler URL</label>
      <input id="webhook-tool-url" type="url" value={url} onChange={(event) => setUrl(event.target.value)} placeholder="https://tools.example.com/lookup-order" required />
      <label htmlFor="webhook-tool-parameters">Parameters (JSON Schema of the arguments; optional)</label>
      <textarea id="webhook-tool-parameters" value={parameters} onChange={(event) => setParameters(event.target.value)} rows={4} placeholder='{"type": "object", "properties": {"order_id": {"type": "string"}}}' />
      <label className="choice">
        <input type="checkbox" checked={requiresApproval} onChange={(event) => setRequiresApproval(event.target.checked)} /> Each call waits for approval
      </label>
      <button type="submit" disabled={create.isPending}>
        Publish webhook tool
      </button>
      <ErrorMessage error={problem ?? create.error} />
    </form>
  );
}

function WebhookTools({ projectId }: { projectId: string }) {
  const tools = useWebhookTools(projectId);
  const rotate = useRotateWebhookTool(projectId);
  const remove = useDeleteWebhookTool(projectId);
  const [secret, setSecret] = useState<Secret | null>(null);
  return (
    <section aria-labelledby="webhook-tools-heading">
      <h2 id="webhook-tools-heading">Webhook tools</h2>
      <p className="note">HTTPS endpoints the agent calls, each call signed with the tool's secret and naming the end-user. A token reaches them only with capability webhook_tools.</p>
      {secret ? (
        <>
          <ShownOnce label={secret.label} value={secret.value} onDismiss={() => setSecret(null)} />
          <p className="note">{secret.note}</p>
        </>
      ) : (
        <NewWebhookToolForm projectId={projectId} onMade={setSecret} />
      )}
      <h3 id="webhook-tool-list-heading">Published</h3>
      <QueryState query={tools} what="webhook tools" />
      {tools.data?.length === 0 ? <p>No webhook tools yet.</p> : null}
      {tools.data && tools.data.length > 0 ? (
        <DataTable columns={['Name', 'Handler', 'Approval', 'Secret', 'Actions']} labelledBy="webhook-tool-list-heading">
          {tools.data.map((tool) => (
            <tr key={tool.id}>
              <td>
                {tool.name}
                <br />
                <span className="note">{tool.description}</span>
              </td>
              <td>
                <code>{tool.url}</code>
              </td>
              <td>{tool.requiresApproval ? 'each call' : 'none'}</td>
              <td>
                {tool.rotated_at ? `rotated ${new Date(tool.rotated_at).toLocaleString()}` : `made ${new Date(tool.created_at).toLocaleString()}`}
                {tool.previousSecretUntil ? <span className="note"> (the old one signs until {new Date(tool.previousSecretUntil).toLocaleString()})</span> : null}
              </td>
              <td>
                <ConfirmButton
                  label="Rotate"
                  target={`the secret of ${toolName(tool)}`}
                  consequence="A new signing secret is shown once. For 24 hours calls carry both signatures, so the old secret still verifies; afterwards only the new one does."
                  onConfirm={async () => {
                    const rotated = await rotate.mutateAsync(tool.id);
                    setSecret({
                      label: `New signing secret of ${tool.name}`,
                      value: rotated.secret,
                      note: `The old secret still verifies until ${new Date(rotated.previousSecretUntil).toLocaleString()} (24 hours); switch your handler to the new one before then.`,
                    });
                  }}
                />{' '}
                <ConfirmButton label="Delete" target={toolName(tool)} consequence="The agent can no longer call it; its secret stops signing. This cannot be undone." onConfirm={() => remove.mutateAsync(tool.id)} />
              </td>
            </tr>
          ))}
        </DataTable>
      ) : null}
    </section>
  );
}

/** `Name: value` lines as headers; the first line that is not one is named. */
function parseHeaders(text: string): Record<string, string> | string {
  const headers: Record<string, string> = {};
  for (const line of text.split('\n').map((candidate) => candidate.trim()).filter(Boolean)) {
    const colon = line.indexOf(':');
    if (colon <= 0) return `"${line}" is not a header: write Name: value, one a line.`;
    headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
  }
  return headers;
}

function ProbeResult({ name, result }: { name: string; result: McpProbeResult }) {
  if (!result.ok) return <span className="error">Probe of {name}: {result.verdict}</span>;
  return (
    <span className="ok">
      Probe of {name}: answered{result.transport ? ` on ${result.transport}` : ''} with {result.tools.length} tool{result.tools.length === 1 ? '' : 's'}
      {result.tools.length ? `: ${result.tools.map((tool) => tool.name).join(', ')}` : ''}.
    </span>
  );
}

function NewMcpServerForm({ projectId }: { projectId: string }) {
  const add = useAddMcpServer(projectId);
  const probe = useProbeMcpServer(projectId);
  const [name, setName] = useState('');
  const [url, setUrl] = useState('');
  const [transport, setTransport] = useState<NonNullable<McpServerCreate['transport']>>('auto');
  const [headerLines, setHeaderLines] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const [probed, setProbed] = useState<{ name: string; result: McpProbeResult } | null>(null);

  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    setProblem(null);
    setProbed(null);
    probe.reset();
    const headers = parseHeaders(headerLines);
    if (typeof headers === 'string') {
      setProblem(headers);
      return;
    }
    const request = { url: url.trim(), transport, ...(Object.keys(headers).length ? { headers } : {}) };
    add.mutate(
      { name: name.trim(), ...request },
      {
        onSuccess: (server) => {
          setName('');
          setUrl('');
          setHeaderLines('');
          // Registering does not reach the server: the probe does, with the loader the turns use.
          probe.mutate(request, { onSuccess: (result) => setProbed({ name: server.name, result }) });
        },
      },
    );
  }

  return (
    <form onSubmit={submit} aria-labelledby="new-mcp-heading">
      <h3 id="new-mcp-heading">Register an MCP server</h3>
      <label htmlFor="mcp-name">Name (its tools are offered as name__tool)</label>
      <input id="mcp-name" value={name} onChange={(event) => setName(event.target.value)} maxLength={24} pattern="[a-z0-9_\-]{1,24}" placeholder="crm" required />
      <label htmlFor="mcp-url">URL (Streamable HTTP or SSE)</label>
      <input id="mcp-url" type="url" value={url} onChange={(event) => setUrl(event.target.value)} placeholder="https://mcp.example.com/mcp" required />
      <label htmlFor="mcp-transport">Transport</label>
      <select id="mcp-transport" value={transport} onChange={(event) => setTransport(event.target.value as typeof transport)}>
        <option value="auto">auto (Streamable HTTP, else SSE)</option>
        <option value="streamable_http">Streamable HTTP</option>
        <option value="sse">SSE</option>
      </select>
      <label htmlFor="mcp-headers">Headers sent on every request (Name: value, one a line; stored sealed, never shown again)</label>
      <textarea id="mcp-headers" value={headerLines} onChange={(event) => setHeaderLines(event.target.value)} rows={2} placeholder="Authorization: Bearer …" />
      <button type="submit" disabled={add.isPending || probe.isPending}>
        Register MCP server
      </button>
      <ErrorMessage error={problem ?? add.error} />
      {probe.error ? <ErrorMessage error={`Registered, but the probe failed: ${describeError(probe.error)}`} /> : null}
      <p role="status">{probe.isPending ? 'Registered; probing the server…' : probed ? <ProbeResult name={probed.name} result={probed.result} /> : ''}</p>
    </form>
  );
}

/** What the runtime found of a server, as its tool listing says. */
function Found({ server, listing }: { server: McpServer; listing: ToolListing | undefined }) {
  const found = listing?.mcp_servers.find((candidate) => candidate.origin === 'project' && candidate.name === server.name);
  if (!found) return <span className="note">not loaded yet</span>;
  if (!found.ok) return <span className="error">{found.verdict ?? 'offers no tools'}</span>;
  const prefix = `${server.name}__`;
  const names = listing!.tools.filter((tool) => tool.origin === 'mcp' && tool.name.startsWith(prefix)).map((tool) => tool.name.slice(prefix.length));
  return (
    <span className="ok">
      {found.tools} tool{found.tools === 1 ? '' : 's'}
      {names.length ? `: ${names.join(', ')}` : ''}
    </span>
  );
}

function McpServers({ projectId }: { projectId: string }) {
  const servers = useMcpServers(projectId);
  const listing = useToolListing(projectId, servers.data?.map((server) => server.name) ?? []);
  const remove = useDeleteMcpServer(projectId);
  return (
    <section aria-labelledby="mcp-heading">
      <h2 id="mcp-heading">MCP servers</h2>
      <p className="note">Servers reached over HTTP whose tools every turn of the project is offered. Stdio servers are not supported.</p>
      <NewMcpServerForm projectId={projectId} />
      <h3 id="mcp-list-heading">Registered</h3>
      <QueryState query={servers} what="MCP servers" />
      {listing.error ? <ErrorMessage error={`What the runtime found could not be read: ${describeError(listing.error)}`} /> : null}
      {servers.data?.length === 0 ? <p>No MCP servers yet.</p> : null}
      {servers.data && servers.data.length > 0 ? (
        <DataTable columns={['Name', 'URL', 'Transport', 'Headers', 'Tools found', 'Actions']} labelledBy="mcp-list-heading">
          {servers.data.map((server) => (
            <tr key={server.id}>
              <td>{server.name}</td>
              <td>
                <code>{server.url}</code>
              </td>
              <td>{server.transport}</td>
              <td>{server.header_names.join(', ') || 'none'}</td>
              <td>{listing.isPending ? <span className="note">reading…</span> : <Found server={server} listing={listing.data} />}</td>
              <td>
                <ConfirmButton
                  label="Delete"
                  target={`MCP server ${server.name}`}
                  consequence="Its tools are no longer offered to the project's turns. This cannot be undone."
                  onConfirm={() => remove.mutateAsync(server.id)}
                />
              </td>
            </tr>
          ))}
        </DataTable>
      ) : null}
    </section>
  );
}

function UploadSkillsForm({ projectId }: { projectId: string }) {
  const upload = useUploadSkills(projectId);
  const [file, setFile] = useState<File | null>(null);
  const [inputKey, setInputKey] = useState(0);
  const [uploaded, setUploaded] = useState<SkillPackage | null>(null);
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    if (!file) return;
    upload.mutate(file, {
      onSuccess: (made) => {
        setUploaded(made);
        setFile(null);
        setInputKey((key) => key + 1);
      },
    });
  }
  return (
    <form onSubmit={submit} aria-labelledby="new-skills-heading">
      <h3 id="new-skills-heading">Publish a skill package</h3>
      <label htmlFor="skills-file">Package (a .zip, a .tar.gz or a single SKILL.md, at most 10 MiB)</label>
      <input key={inputKey} id="skills-file" type="file" accept=".zip,.tar.gz,.tgz,.md" onChange={(event) => setFile(event.target.files?.[0] ?? null)} required />
      <button type="submit" disabled={upload.isPending || !file}>
        Publish skills
      </button>
      <ErrorMessage error={upload.error} />
      <p role="status" className="note">
        {uploaded ? `Published ${uploaded.name}: ${uploaded.skills.map((skill) => skill.name).join(', ')}.${uploaded.warnings.length ? ` Left out: ${uploaded.warnings.join('; ')}` : ''}` : ''}
      </p>
    </form>
  );
}

function Skills({ projectId }: { projectId: string }) {
  const skills = useSkills(projectId);
  const remove = useDeleteSkills(projectId);
  return (
    <section aria-labelledby="skills-heading">
      <h2 id="skills-heading">Skills</h2>
      <p className="note">Packages of SKILL.md files (YAML frontmatter with name and description) the agent may load: the project's, and those end-users uploaded for themselves.</p>
      <UploadSkillsForm projectId={projectId} />
      <h3 id="skills-list-heading">Packages</h3>
      <QueryState query={skills} what="skills" />
      {skills.data?.length === 0 ? <p>No skills yet.</p> : null}
      {skills.data && skills.data.length > 0 ? (
        <DataTable columns={['Package', 'Skills', 'Whose', 'Published', 'Actions']} labelledBy="skills-list-heading">
          {skills.data.map((plugin) => (
            <tr key={plugin.id}>
              <td>
                {plugin.name}
                {plugin.warnings.length ? <span className="note"> (left out: {plugin.warnings.join('; ')})</span> : null}
              </td>
              <td>{plugin.skills.map((skill) => skill.name).join(', ')}</td>
              <td>{plugin.visibility === 'project' ? 'the project' : `${plugin.owner_subject ?? 'an end-user'} (private)`}</td>
              <td>{new Date(plugin.created_at).toLocaleString()}</td>
              <td>
                <ConfirmButton label="Delete" target={`skill package ${plugin.name}`} consequence="Its skills are no longer offered. This cannot be undone." onConfirm={() => remove.mutateAsync(plugin.id)} />
              </td>
            </tr>
          ))}
        </DataTable>
      ) : null}
    </section>
  );
}

export function ToolsSection({ projectId }: { projectId: string }) {
  return (
    <>
      <WebhookTools projectId={projectId} />
      <McpServers projectId={projectId} />
      <Skills projectId={projectId} />
    </>
  );
}
