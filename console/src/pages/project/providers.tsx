// The project's providers (its own LLM keys): register one (the service tries the key against the provider before
// storing it, so a wrong key or model is refused here), refresh its catalog, delete it; and the default model.
import { useState, type FormEvent } from 'react';
import { ConfirmButton } from '../../components/confirm.js';
import { QueryState } from '../../components/query-state.js';
import { DataTable } from '../../components/data-table.js';
import { ErrorMessage } from '../../components/error-message.js';
import { useDefaultModel, useDeleteProvider, useRegisteredModels, useProviders, useRefreshProvider, useRegisterProvider, useSetDefaultModel, type Provider } from '../../queries.js';

const providerName = (provider: Provider) => `provider ${new URL(provider.base_url).host} (${provider.models.join(', ')})`;

function RegisterForm({ projectId }: { projectId: string }) {
  const register = useRegisterProvider(projectId);
  const [kind, setKind] = useState<'openai' | 'openai_compatible'>('openai_compatible');
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const text = (name: string) => String(form.get(name) ?? '').trim();
    const baseUrl = text('base_url');
    const embeddingModel = text('embedding_model');
    register.mutate(
      {
        provider: kind,
        models: text('models')
          .split(',')
          .map((model) => model.trim())
          .filter(Boolean),
        values: { api_key: text('api_key'), ...(baseUrl ? { base_url: baseUrl } : {}), ...(embeddingModel ? { embedding_model: embeddingModel } : {}) },
      },
      // The key leaves the form once sent: it is not kept in the page.
      { onSuccess: () => (event.target as HTMLFormElement).reset() },
    );
  }
  return (
    <form onSubmit={submit} aria-labelledby="register-heading">
      <h2 id="register-heading">Register a provider</h2>
      <label htmlFor="provider-kind">Provider</label>
      <select id="provider-kind" value={kind} onChange={(event) => setKind(event.target.value as typeof kind)}>
        <option value="openai_compatible">OpenAI-compatible server</option>
        <option value="openai">OpenAI</option>
      </select>
      <label htmlFor="provider-base-url">API base URL{kind === 'openai' ? ' (optional)' : ''}</label>
      <input id="provider-base-url" name="base_url" type="url" required={kind === 'openai_compatible'} placeholder={kind === 'openai' ? 'https://api.openai.com/v1' : 'https://llm.example.com/v1'} />
      <label htmlFor="provider-key">API key</label>
      <input id="provider-key" name="api_key" type="password" autoComplete="off" required />
      <label htmlFor="provider-models">Chat models (comma-separated)</label>
      <input id="provider-models" name="models" required placeholder="gpt-4o-mini" />
      <label htmlFor="provider-embedding">Embedding model (optional)</label>
      <input id="provider-embedding" name="embedding_model" placeholder={kind === 'openai' ? 'text-embedding-3-small' : ''} />
      <button type="submit" disabled={register.isPending}>
        {register.isPending ? 'Trying the key…' : 'Register provider'}
      </button>
      <p role="status" className="note">
        {register.isSuccess ? `Registered: ${register.data.models.join(', ')}${register.data.warnings?.length ? `. ${register.data.warnings.join(' ')}` : ''}` : ''}
      </p>
      <ErrorMessage error={register.error} />
    </form>
  );
}

function DefaultModel({ projectId, models }: { projectId: string; models: string[] }) {
  const current = useDefaultModel(projectId);
  const setModel = useSetDefaultModel(projectId);
  return (
    <section aria-labelledby="default-model-heading">
      <h2 id="default-model-heading">Default model</h2>
      <ErrorMessage error={current.error} />
      {current.data ? (
        <form
          className="inline"
          onSubmit={(event) => {
            event.preventDefault();
            const chosen = String(new FormData(event.currentTarget).get('model'));
            setModel.mutate(chosen === '' ? null : chosen);
          }}
        >
          <label htmlFor="default-model">Turns that name no model use</label>
          <select id="default-model" name="model" key={current.data.model ?? ''} defaultValue={current.data.model ?? ''}>
            <option value="">(none: such turns end with no_model)</option>
            {models.map((model) => (
              <option key={model}>{model}</option>
            ))}
          </select>
          <button type="submit" disabled={setModel.isPending}>
            Set default model
          </button>
          <ErrorMessage error={setModel.error} />
        </form>
      ) : null}
    </section>
  );
}

function ProviderRow({ projectId, provider }: { projectId: string; provider: Provider }) {
  const refresh = useRefreshProvider(projectId);
  const remove = useDeleteProvider(projectId);
  return (
    <tr>
      <td>
        {provider.provider}
        <br />
        <code>{provider.base_url}</code>
      </td>
      <td>{provider.models.join(', ')}</td>
      <td>{provider.derived.embeddingModel ? `${provider.derived.embeddingModel} (${provider.derived.embeddingDim ?? '?'} dimensions)` : 'none'}</td>
      <td>{provider.key_last_four ? <code>…{provider.key_last_four}</code> : 'hidden'}</td>
      <td>
        {new Date(provider.refreshed_at).toLocaleString()}
        {provider.warnings?.map((warning) => (
          <p key={warning} className="note">
            {warning}
          </p>
        ))}
        {refresh.data?.missing_models.length ? <p className="error">No longer in the catalog: {refresh.data.missing_models.join(', ')}</p> : null}
        <ErrorMessage error={refresh.error} />
      </td>
      <td>
        <div className="actions">
          <button type="button" className="secondary" aria-label={`Refresh ${providerName(provider)}`} disabled={refresh.isPending} onClick={() => refresh.mutate(provider.id)}>
            Refresh
          </button>
          <ConfirmButton label="Delete" target={providerName(provider)} consequence="Turns on its models fail with no_provider until another provider serves them; its key is erased." onConfirm={() => remove.mutateAsync(provider.id)} />
        </div>
      </td>
    </tr>
  );
}

export function ProvidersSection({ projectId }: { projectId: string }) {
  const providers = useProviders(projectId);
  const models = useRegisteredModels(projectId);
  return (
    <>
      <section aria-labelledby="providers-heading">
        <h2 id="providers-heading">Providers</h2>
        <QueryState query={providers} what="providers" />
        {providers.data?.length === 0 ? <p>No provider yet: turns answer 409 no_provider until one is registered.</p> : null}
        {providers.data && providers.data.length > 0 ? (
          <DataTable columns={['Provider', 'Chat models', 'Embedding', 'Key', 'Catalog read', 'Actions']} caption="The project's providers">
            {providers.data.map((provider) => (
              <ProviderRow key={provider.id} projectId={projectId} provider={provider} />
            ))}
          </DataTable>
        ) : null}
      </section>
      <DefaultModel projectId={projectId} models={models} />
      <RegisterForm projectId={projectId} />
    </>
  );
}
