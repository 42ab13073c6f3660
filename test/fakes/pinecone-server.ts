// A protocol-level fake of Pinecone's data plane (one serverless index, cosine metric), served on loopback for the
// real `@pinecone-database/pinecone` client: `POST /vectors/upsert`, `/query`, `/vectors/update`,
// `/vectors/delete` (by ids, by filter, or all), `GET /vectors/list` and `DELETE /namespaces/{namespace}`, with the
// `Api-Key` header required. Metadata filters are evaluated as Pinecone documents them ($eq, $ne, $in, $nin,
// $exists, $gt, $gte, $lt, $lte, $and, $or; a list field matches $eq and $in when any element does), and what Pinecone
// refuses is refused here too: null metadata values, an empty `$in`, an unknown operator, a vector of another
// dimension than the index's. Queries are exact (every vector measured), which is what a test wants to compare.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';

type Metadata = Record<string, string | number | boolean | string[]>;
interface StoredVector {
  values: number[];
  metadata: Metadata;
}

export interface PineconeRequest {
  method: string;
  path: string;
  body: unknown;
}

class Refusal extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export class FakePineconeServer {
  readonly requests: PineconeRequest[] = [];
  /** While true, every call is answered 503, as an index in trouble would. */
  unavailable = false;
  private readonly namespaces = new Map<string, Map<string, StoredVector>>();
  private readonly server: Server;
  private port = 0;

  private constructor(
    readonly apiKey: string,
    readonly dimension: number,
  ) {
    this.server = createServer((req, res) => void this.serve(req, res).catch(() => res.destroy()));
  }

  static async start(options: { apiKey: string; dimension: number }): Promise<FakePineconeServer> {
    const fake = new FakePineconeServer(options.apiKey, options.dimension);
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', resolve));
    fake.port = (fake.server.address() as { port: number }).port;
    return fake;
  }

  /** The index host, as `describe_index` would give it. */
  get host(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Records of a namespace, for assertions. */
  records(namespace: string): Map<string, StoredVector> {
    return this.namespaces.get(namespace) ?? new Map();
  }

  /** Every namespace that holds a record. */
  namespacesInUse(): string[] {
    return [...this.namespaces.entries()].filter(([, records]) => records.size > 0).map(([name]) => name);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.host);
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: unknown;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch {
      return send(res, 400, { code: 3, message: 'the body is not JSON' });
    }
    this.requests.push({ method: req.method ?? 'GET', path: url.pathname, body });
    if (this.unavailable) return send(res, 503, { code: 14, message: 'the index is unavailable' });
    if (req.headers['api-key'] !== this.apiKey) return send(res, 401, { code: 16, message: 'Invalid API Key' });
    try {
      const answer = this.route(req.method ?? 'GET', url, (body ?? {}) as Record<string, unknown>);
      send(res, answer.status ?? 200, answer.body);
    } catch (error) {
      if (error instanceof Refusal) return send(res, error.status, { code: 3, message: error.message });
      throw error;
    }
  }

  private route(method: string, url: URL, body: Record<string, unknown>): { status?: number; body: unknown } {
    const path = url.pathname;
    if (method === 'POST' && path === '/vectors/upsert') return { body: this.upsert(body) };
    if (method === 'POST' && path === '/query') return { body: this.query(body) };
    if (method === 'POST' && path === '/vectors/update') return { body: this.update(body) };
    if (method === 'POST' && path === '/vectors/delete') return { body: this.delete(body) };
    if (method === 'GET' && path === '/vectors/list') return { body: this.list(url.searchParams) };
    if (method === 'POST' && path === '/describe_index_stats') return { body: this.stats() };
    const namespace = /^\/namespaces\/([^/]+)$/.exec(path);
    if (method === 'DELETE' && namespace) {
      const name = decodeURIComponent(namespace[1]!);
      if (!this.namespaces.delete(name)) throw new Refusal(404, `namespace ${name} not found`);
      return { status: 202, body: {} };
    }
    throw new Refusal(404, `no route ${method} ${path}`);
  }

  private stats() {
    const namespaces = Object.fromEntries([...this.namespaces.entries()].filter(([, records]) => records.size > 0).map(([name, records]) => [name, { vectorCount: records.size }]));
    const total = Object.values(namespaces).reduce((sum, namespace) => sum + namespace.vectorCount, 0);
    return { namespaces, dimension: this.dimension, indexFullness: 0, totalVectorCount: total, metric: 'cosine', vectorType: 'dense' };
  }

  private space(body: Record<string, unknown>, create = false): Map<string, StoredVector> {
    const name = typeof body.namespace === 'string' ? body.namespace : '';
    let records = this.namespaces.get(name);
    if (!records) {
      records = new Map();
      if (create) this.namespaces.set(name, records);
    }
    return records;
  }

  private upsert(body: Record<string, unknown>) {
    if (!Array.isArray(body.vectors) || body.vectors.length === 0 || body.vectors.length > 1000) throw new Refusal(400, 'vectors: between 1 and 1000 records');
    const records = this.space(body, true);
    for (const vector of body.vectors as { id?: unknown; values?: unknown; metadata?: unknown }[]) {
      if (typeof vector.id !== 'string' || vector.id === '' || vector.id.length > 512) throw new Refusal(400, 'a record id is a string of 1 to 512 characters');
      records.set(vector.id, { values: this.values(vector.values), metadata: metadataOf(vector.metadata) });
    }
    return { upsertedCount: body.vectors.length };
  }

  private query(body: Record<string, unknown>) {
    const topK = body.topK;
    if (typeof topK !== 'number' || !Number.isInteger(topK) || topK < 1 || topK > 10_000) throw new Refusal(400, 'topK must be an integer from 1 to 10000');
    const vector = this.values(body.vector);
    const filter = body.filter === undefined ? undefined : filterOf(body.filter);
    const matches = [...this.space(body).entries()]
      .filter(([, record]) => filter === undefined || matchesFilter(record.metadata, filter))
      .map(([id, record]) => ({ id, score: cosine(vector, record.values), ...(body.includeMetadata ? { metadata: record.metadata } : {}), ...(body.includeValues ? { values: record.values } : {}) }))
      .sort((a, b) => b.score - a.score || a.id.localeCompare(b.id))
      .slice(0, topK);
    return { matches, namespace: body.namespace ?? '', usage: { readUnits: 5 } };
  }

  private update(body: Record<string, unknown>) {
    const records = this.space(body);
    const set = body.setMetadata === undefined ? undefined : metadataOf(body.setMetadata);
    if (typeof body.id === 'string') {
      const record = records.get(body.id);
      if (!record) return {};
      if (body.values !== undefined) record.values = this.values(body.values);
      if (set) Object.assign(record.metadata, set);
      return {};
    }
    if (body.filter === undefined || !set) throw new Refusal(400, 'an update names an id, or a filter with setMetadata');
    const filter = filterOf(body.filter);
    let matched = 0;
    for (const record of records.values()) {
      if (!matchesFilter(record.metadata, filter)) continue;
      Object.assign(record.metadata, set);
      matched += 1;
    }
    return { matchedRecords: matched };
  }

  private delete(body: Record<string, unknown>) {
    const records = this.space(body);
    const ways = [body.ids !== undefined, body.deleteAll === true, body.filter !== undefined].filter(Boolean).length;
    if (ways !== 1) throw new Refusal(400, 'delete by ids, by filter, or all: exactly one');
    if (body.deleteAll === true) records.clear();
    else if (Array.isArray(body.ids)) for (const id of body.ids) records.delete(String(id));
    else {
      const filter = filterOf(body.filter);
      for (const [id, record] of records) if (matchesFilter(record.metadata, filter)) records.delete(id);
    }
    return {};
  }

  private list(params: URLSearchParams) {
    const records = this.namespaces.get(params.get('namespace') ?? '') ?? new Map<string, StoredVector>();
    const prefix = params.get('prefix') ?? '';
    const limit = Number(params.get('limit') ?? 100);
    const after = params.get('paginationToken') ? Buffer.from(params.get('paginationToken')!, 'base64url').toString('utf8') : '';
    const ids = [...records.keys()].filter((id) => id.startsWith(prefix) && id > after).sort();
    const page = ids.slice(0, limit);
    return {
      vectors: page.map((id) => ({ id })),
      ...(ids.length > limit ? { pagination: { next: Buffer.from(page.at(-1)!).toString('base64url') } } : {}),
      namespace: params.get('namespace') ?? '',
      usage: { readUnits: 1 },
    };
  }

  private values(values: unknown): number[] {
    if (!Array.isArray(values) || !values.every((v) => typeof v === 'number' && Number.isFinite(v))) throw new Refusal(400, 'values must be a list of numbers');
    if (values.length !== this.dimension) throw new Refusal(400, `Vector dimension ${values.length} does not match the dimension of the index ${this.dimension}`);
    return values as number[];
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function metadataOf(value: unknown): Metadata {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Refusal(400, 'metadata must be an object');
  for (const [key, field] of Object.entries(value)) {
    const ok = typeof field === 'string' || typeof field === 'boolean' || (typeof field === 'number' && Number.isFinite(field)) || (Array.isArray(field) && field.every((item) => typeof item === 'string'));
    if (!ok) throw new Refusal(400, `metadata field ${key}: a string, number, boolean or list of strings (null is not allowed)`);
  }
  return { ...(value as Metadata) };
}

type Filter = Record<string, unknown>;

function filterOf(value: unknown): Filter {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Refusal(400, 'filter must be an object');
  return value as Filter;
}

const OPERATORS = new Set(['$eq', '$ne', '$in', '$nin', '$exists', '$gt', '$gte', '$lt', '$lte']);

function matchesFilter(metadata: Metadata, filter: Filter): boolean {
  for (const [key, condition] of Object.entries(filter)) {
    if (key === '$and' || key === '$or') {
      if (!Array.isArray(condition) || condition.length === 0) throw new Refusal(400, `${key} takes a non-empty list of filters`);
      const results = condition.map((inner) => matchesFilter(metadata, filterOf(inner)));
      if (key === '$and' ? !results.every(Boolean) : !results.some(Boolean)) return false;
      continue;
    }
    if (key.startsWith('$')) throw new Refusal(400, `unknown operator ${key}`);
    const operators = condition !== null && typeof condition === 'object' && !Array.isArray(condition) ? (condition as Record<string, unknown>) : { $eq: condition };
    const value = metadata[key];
    for (const [operator, argument] of Object.entries(operators)) {
      if (!OPERATORS.has(operator)) throw new Refusal(400, `unknown operator ${operator}`);
      if (!holds(value, operator, argument)) return false;
    }
  }
  return true;
}

function holds(value: Metadata[string] | undefined, operator: string, argument: unknown): boolean {
  const equal = (wanted: unknown) => (Array.isArray(value) ? value.includes(wanted as string) : value === wanted);
  switch (operator) {
    case '$eq':
      return equal(argument);
    case '$ne':
      return !equal(argument);
    case '$in':
    case '$nin': {
      if (!Array.isArray(argument) || argument.length === 0) throw new Refusal(400, `${operator} takes a non-empty list`);
      const any = argument.some(equal);
      return operator === '$in' ? any : !any;
    }
    case '$exists':
      if (typeof argument !== 'boolean') throw new Refusal(400, '$exists takes true or false');
      return (value !== undefined) === argument;
    default: {
      if (typeof argument !== 'number' || typeof value !== 'number') return false;
      return operator === '$gt' ? value > argument : operator === '$gte' ? value >= argument : operator === '$lt' ? value < argument : value <= argument;
    }
  }
}

function cosine(a: number[], b: number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}
