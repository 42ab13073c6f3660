// The repository's layering holds: lib imports no program, no program imports another (the all-in-one alone
// composes the runtime and the control-api), imports cross a package boundary only by package name, and no module
// imports itself back through a cycle. Tests beside the code may also use the shared harness (`@agentplane/test`).
// Read from the sources' own import statements.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Each workspace package and the packages it may import besides itself. */
const allowed: Record<string, string[]> = {
  lib: [],
  runtime: ['lib'],
  'control-api': ['lib'],
  operator: ['lib'],
  'all-in-one': ['lib', 'runtime', 'control-api'],
};

interface ModuleImport {
  specifier: string;
  typeOnly: boolean;
}

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === 'node_modules' || name === 'dist' ? [] : sourceFiles(path);
    return path.endsWith('.ts') && !path.endsWith('.d.ts') ? [path] : [];
  });
}

/** Static and dynamic imports and re-exports of one module, with whether each carries types only. */
export function importsOf(text: string): ModuleImport[] {
  const found: ModuleImport[] = [];
  const statement = /^\s*(import|export)\s+(type\s+)?([^'";]*?\s+from\s+)?['"]([^'"]+)['"]/gm;
  for (const match of text.matchAll(statement)) found.push({ specifier: match[4]!, typeOnly: Boolean(match[2]) });
  for (const match of text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) found.push({ specifier: match[1]!, typeOnly: false });
  return found;
}

/** The file a specifier names, for relative and workspace-package specifiers; null for anything else. */
function resolveSpecifier(from: string, specifier: string): string | null {
  let base: string;
  if (specifier.startsWith('.')) base = resolve(dirname(from), specifier).replace(/\.js$/, '');
  else {
    const match = /^@agentplane\/([^/]+)(?:\/(.+))?$/.exec(specifier);
    if (!match) return null;
    base = match[1] === 'test' ? join(root, 'test', match[2]!) : join(root, match[1]!, 'src', match[2] ?? 'index');
  }
  for (const candidate of [`${base}.ts`, join(base, 'index.ts')]) if (existsSync(candidate)) return candidate;
  return null;
}

const packageOf = (file: string) => relative(root, file).split('/')[0]!;

function moduleGraph(): Map<string, { file: string; specifier: string; typeOnly: boolean }[]> {
  const graph = new Map<string, { file: string; specifier: string; typeOnly: boolean }[]>();
  for (const pkg of Object.keys(allowed)) {
    for (const file of sourceFiles(join(root, pkg, 'src'))) {
      const edges = importsOf(readFileSync(file, 'utf8')).flatMap((imp) => {
        const target = resolveSpecifier(file, imp.specifier);
        return target ? [{ file: target, specifier: imp.specifier, typeOnly: imp.typeOnly }] : [];
      });
      graph.set(file, edges);
    }
  }
  return graph;
}

/** Strongly connected components of more than one module (or a module importing itself), by Tarjan's algorithm. */
export function cycles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string) => {
    indices.set(node, index);
    low.set(node, index++);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!indices.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) low.set(node, Math.min(low.get(node)!, indices.get(next)!));
    }
    if (low.get(node) === indices.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(component.sort());
    }
  };
  for (const node of graph.keys()) if (!indices.has(node)) visit(node);
  return found;
}

describe('the repository layout', () => {
  const graph = moduleGraph();

  it('reads every package', () => {
    for (const pkg of Object.keys(allowed)) {
      expect([...graph.keys()].some((file) => packageOf(file) === pkg), pkg).toBe(true);
      expect(existsSync(join(root, pkg, 'package.json')), `${pkg}/package.json`).toBe(true);
    }
  });

  it('lets lib import no program and no program import another', () => {
    const breaches: string[] = [];
    for (const [file, edges] of graph) {
      const from = packageOf(file);
      for (const edge of edges) {
        const to = packageOf(edge.file);
        if (to === 'test' && file.endsWith('.test.ts')) continue;
        if (to !== from && !allowed[from]!.includes(to)) breaches.push(`${relative(root, file)} imports ${edge.specifier}`);
      }
    }
    expect(breaches).toEqual([]);
  });

  it('crosses a package boundary only by package name, never by a relative path', () => {
    const breaches: string[] = [];
    for (const [file, edges] of graph) {
      for (const edge of edges) {
        if (edge.specifier.startsWith('.') && packageOf(edge.file) !== packageOf(file)) breaches.push(`${relative(root, file)} imports ${edge.specifier}`);
      }
    }
    expect(breaches).toEqual([]);
  });

  it('has no import cycle', () => {
    const plain = new Map([...graph].map(([file, edges]) => [file, edges.map((edge) => edge.file).filter((target) => packageOf(target) !== 'test')]));
    expect(cycles(plain).map((cycle) => cycle.map((file) => relative(root, file)))).toEqual([]);
  });

  it('finds what it looks for: a breach, a relative crossing and a cycle in made-up sources', () => {
    expect(importsOf("import { a } from '@agentplane/runtime/app';\nimport type { B } from './b.js';\nconst c = await import('../c.js');"))
      .toEqual([
        { specifier: '@agentplane/runtime/app', typeOnly: false },
        { specifier: './b.js', typeOnly: true },
        { specifier: '../c.js', typeOnly: false },
      ]);
    expect(cycles(new Map([['a', ['b']], ['b', ['c']], ['c', ['a']], ['d', ['a']]]))).toEqual([['a', 'b', 'c']]);
    expect(cycles(new Map([['a', ['a']]]))).toEqual([['a']]);
    expect(cycles(new Map([['a', ['b']], ['b', []]]))).toEqual([]);
  });
});

describe('the documentation', () => {
  const markdown = (dir: string): string[] =>
    readdirSync(dir).flatMap((name) => {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) return name === 'node_modules' || name.startsWith('.') ? [] : markdown(path);
      return name.endsWith('.md') ? [path] : [];
    });

  it('lists every decision record in docs/architecture.md', () => {
    const architecture = readFileSync(join(root, 'docs', 'architecture.md'), 'utf8');
    const records = readdirSync(join(root, 'docs', 'decisions')).filter((name) => name.endsWith('.md'));
    expect(records.filter((name) => !architecture.includes(`(decisions/${name})`))).toEqual([]);
  });

  it('links only to files the repository has (a clone has nothing beside it)', () => {
    const broken: string[] = [];
    for (const file of [join(root, 'README.md'), ...markdown(join(root, 'docs')), ...markdown(join(root, 'charts')), ...markdown(join(root, 'operator'))]) {
      const text = readFileSync(file, 'utf8');
      if (text.includes('../shared/')) broken.push(`${relative(root, file)} points into ../shared/`);
      for (const match of text.matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
        const target = match[1]!;
        if (/^[a-z]+:/.test(target)) continue;
        if (!existsSync(resolve(dirname(file), target))) broken.push(`${relative(root, file)} links to ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });
});
