// The web as the tests need it, on loopback: a protocol-level fake of the two search APIs the runtime speaks
// (Brave Search's `/res/v1/web/search` with `X-Subscription-Token`, SearXNG's `/search?format=json`), and pages to
// read: an article among navigation, a page nested 3,000 deep, plain text, redirects (one to a cloud metadata address), a page past the size
// limit, a binary file, a slow page and one that trickles. It keeps each request's path, query and headers.
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export const ARTICLE_TEXT = 'The kettle boils water in ninety seconds and switches itself off.';

const article = `<!doctype html><html><head><title>Kettle review</title></head><body>
<nav><a href="/">Home</a> <a href="/shop">Shop</a> <a href="/about">About us</a></nav>
<article><h1>Kettle review</h1><p>${ARTICLE_TEXT}</p><p>It holds one and a half litres, and its handle stays cool while it boils.</p>
<p>We tested it for three weeks in a busy office kitchen, where it was used about forty times a day.</p></article>
<footer>Copyright and cookie notices</footer></body></html>`;

export interface WebRequest {
  path: string;
  query: URLSearchParams;
  headers: IncomingHttpHeaders;
}

export class FakeWeb {
  readonly requests: WebRequest[] = [];

  private constructor(
    private readonly server: Server,
    readonly url: string,
    readonly apiKey: string,
  ) {}

  static async start(apiKey = 'brave-test-key-0001'): Promise<FakeWeb> {
    let self!: FakeWeb;
    const server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      self.requests.push({ path: url.pathname, query: url.searchParams, headers: req.headers });
      const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      const hits = (count: number) =>
        Array.from({ length: Math.min(count, 3) }, (_, i) => ({ title: `Result ${i + 1} for ${url.searchParams.get('q')}`, url: `${self.url}/pages/article?n=${i + 1}`, text: `Snippet <strong>${i + 1}</strong>` }));
      switch (url.pathname) {
        case '/res/v1/web/search':
          if (req.headers['x-subscription-token'] !== apiKey) return json(401, { error: 'invalid token' });
          return json(200, { web: { results: hits(Number(url.searchParams.get('count') ?? 5)).map((hit) => ({ title: hit.title, url: hit.url, description: hit.text })) } });
        case '/search':
          if (url.searchParams.get('format') !== 'json') return json(403, { error: 'format' });
          return json(200, { results: hits(10).map((hit) => ({ title: hit.title, url: hit.url, content: hit.text })) });
        case '/pages/article':
          return res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(article);
        case '/pages/deep':
          return res
            .writeHead(200, { 'content-type': 'text/html' })
            .end(`<html><head><title>Deep</title></head><body>${'<div>'.repeat(3_000)}The bottom of the page.${'</div>'.repeat(3_000)}</body></html>`);
        case '/pages/plain':
          return res.writeHead(200, { 'content-type': 'text/plain' }).end('Just   plain\n\n\n\ntext.');
        case '/pages/redirect-ok':
          return res.writeHead(302, { location: '/pages/article' }).end();
        case '/pages/redirect-metadata':
          return res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
        case '/pages/big':
          return res.writeHead(200, { 'content-type': 'text/plain' }).end('x'.repeat(3 * 1024 * 1024));
        case '/pages/binary':
          return res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(Buffer.alloc(64));
        case '/pages/trickle': {
          res.writeHead(200, { 'content-type': 'text/plain' });
          const drip = setInterval(() => (res.destroyed ? clearInterval(drip) : res.write('.')), 300);
          return void setTimeout(() => (clearInterval(drip), res.end()), 6_000);
        }
        case '/pages/slow':
          return void setTimeout(() => res.writeHead(200, { 'content-type': 'text/plain' }).end('late'), 3_000);
        default:
          return res.writeHead(404).end('not found');
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    self = new FakeWeb(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`, apiKey);
    return self;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
