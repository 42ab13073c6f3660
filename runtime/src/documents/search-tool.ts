// The agent's document search (SPEC.md Capabilities: `documents:read`, flag `enable_rag`): the same search as POST
// /documents/retrieve, run for the person whose turn it is, so the agent finds only what they may see. Its findings
// come back numbered, and the answer's `citations` list them.
import type { Principal } from '../auth/authenticate.js';
import type { CitationStyle, Source } from '../chat/citations.js';
import type { ServerTool } from '../chat/tools.js';
import type { RetrievedChunk } from './retrieval.js';
import { DEFAULT_RETRIEVE_K, MAX_QUERY_LENGTH } from './limits.js';
import type { DocumentService } from './service.js';

export const SEARCH_DOCUMENTS = 'search_documents';
/** Passages one search hands the model: enough to answer from, few enough to leave room for the conversation. */
const MAX_PASSAGES = 10;

/** The passages of a message's automatic context (docs/decisions/0045): fewer than a search, to leave room. */
const CONTEXT_PASSAGES = 5;

/** The automatic document context for a person's message: the same search the tool runs, for the same person. */
export async function documentContext(documents: DocumentService, principal: Principal, message: string): Promise<{ sources: Source[]; style: CitationStyle }> {
  const query = message.trim().slice(0, MAX_QUERY_LENGTH);
  const style = principal.configuration.document.retrieval?.citations ?? 'inline';
  if (query === '') return { sources: [], style };
  const { results } = await documents.retrieve(principal, { query, k: CONTEXT_PASSAGES });
  return { sources: results.map(sourceOf), style };
}

const sourceOf = (result: RetrievedChunk): Source => ({
  document_id: result.document_id,
  title: result.title,
  chunk_id: result.chunk_id,
  ordinal: result.ordinal,
  heading_path: result.heading_path,
  page: result.page,
  score: result.score,
  text: result.text,
});

export function documentSearchTool(documents: DocumentService, principal: Principal): ServerTool {
  return {
    needs: ['documents:read'],
    definition: {
      name: SEARCH_DOCUMENTS,
      description:
        'Search the documents this person may read (uploaded files, manuals, policies) for passages that answer a question. ' +
        'Use it before answering anything the documents may cover, and answer from the passages, citing each one you use by its marker, such as [1].',
      parameters: {
        type: 'object',
        properties: {
          query: { type: 'string', description: 'What to look for, in words: the question or its key terms' },
          k: { type: 'integer', minimum: 1, maximum: MAX_PASSAGES, description: `How many passages (default ${DEFAULT_RETRIEVE_K})` },
        },
        required: ['query'],
      },
    },
    async run(args) {
      const query = typeof args.query === 'string' ? args.query.trim().slice(0, MAX_QUERY_LENGTH) : '';
      if (query === '') return { ok: false, message: `${SEARCH_DOCUMENTS} needs a query: call it again with the words to look for.` };
      const k = typeof args.k === 'number' && Number.isInteger(args.k) ? Math.min(MAX_PASSAGES, Math.max(1, args.k)) : DEFAULT_RETRIEVE_K;
      const { results } = await documents.retrieve(principal, { query, k });
      return {
        ok: true,
        style: principal.configuration.document.retrieval?.citations ?? 'inline',
        sources: results.map(sourceOf),
      };
    },
  };
}
