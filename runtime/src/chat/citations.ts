// Sources a turn's server tools found (the document search), numbered once per turn: the model reads each with its
// `[n]` marker and cites what it uses by it, and the answer carries the list (the blocking response and the `done`
// frame), so a client can show where each claim came from. A chunk found twice keeps its first number.
import type { CitationOutput } from './schemas.js';

/** A passage a server tool found, before it has a number. */
export interface Source {
  document_id: string;
  title: string;
  chunk_id: string;
  ordinal: number;
  heading_path: string[];
  page: number | null;
  score: number;
  text: string;
}

/** How the project wants sources cited: markers in the answer's text, or only the list beside it. */
export type CitationStyle = 'inline' | 'list';

/** Numbers the sources (reusing the number of one already cited) and writes them as the tool's answer to the model. */
export function citeSources(cited: CitationOutput[], sources: Source[], style: CitationStyle = 'inline'): string {
  if (sources.length === 0) return 'No passage of the documents you may read matches. Say so rather than answering from memory.';
  const parts: string[] = [];
  for (const source of sources) {
    let citation = cited.find((entry) => entry.chunk_id === source.chunk_id);
    if (!citation) {
      citation = {
        index: cited.length + 1,
        document_id: source.document_id,
        title: source.title,
        chunk_id: source.chunk_id,
        ordinal: source.ordinal,
        heading_path: source.heading_path,
        page: source.page,
        score: source.score,
      };
      cited.push(citation);
    }
    const where = [source.title, ...source.heading_path].join(' › ') + (source.page === null ? '' : ` (page ${source.page})`);
    parts.push(`[${citation.index}] ${where}\n${source.text}`);
  }
  const instruction =
    style === 'inline'
      ? `Cite what you use with its marker, such as [${cited[0]!.index}].`
      : 'Answer from these passages without markers or a list of sources in your text: the sources are shown with your answer.';
  return `${parts.join('\n\n')}\n\n${instruction}`;
}
