// Keeps resources.ts and crds/*.yaml in step. The field tables below are typed from the TypeScript interfaces, so a
// field added to an interface but not to its table fails typecheck; the test then walks each CRD schema against its
// table, so a field added to a CRD but not to the interface (or with another type or optionality) fails here.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  API_VERSION,
  GROUP,
  PROJECTS,
  TENANTS,
  VERSION,
  type Project,
  type ProjectSpec,
  type ProjectStatus,
  type Tenant,
  type TenantSpec,
  type TenantStatus,
} from './resources.js';

// ---------------------------------------------------------------------------------------------------------------
// How a TypeScript type appears in an OpenAPI schema, derived from the type so the compiler checks each table.

/** Whether property K of T is optional (`{}` is assignable to `Pick<T, K>` only then). */
type IsOptional<T, K extends keyof T> = {} extends Pick<T, K> ? true : false;

/** Every property of T, none missing and none extra, with its shape and whether the schema requires it. */
type Fields<T> = { [K in keyof T]-?: Field<NonNullable<T[K]>> & { required: IsOptional<T, K> extends true ? false : true } };

type Field<V> = [V] extends [string]
  ? string extends V
    ? { type: 'string' }
    : { type: 'string'; enum: Record<V, true> }
  : [V] extends [number]
    ? { type: 'integer' }
    : [V] extends [boolean]
      ? { type: 'boolean' }
      : [V] extends [readonly (infer Item)[]]
        ? { type: 'array'; items: Field<Item> }
        : string extends keyof V
          ? unknown extends V[keyof V]
            ? { type: 'any-json-object' }
            : { type: 'map'; values: Field<V[keyof V]> }
          : { type: 'object'; fields: Fields<V> };

/** The untyped view of a field table the walk below reads. */
type AnyField =
  | { type: 'string'; enum?: Record<string, true>; required?: boolean }
  | { type: 'integer' | 'boolean' | 'any-json-object' | 'kubernetes'; required?: boolean }
  | { type: 'array'; items: AnyField; required?: boolean }
  | { type: 'map'; values: AnyField; required?: boolean }
  | { type: 'object'; fields: Record<string, AnyField>; required?: boolean };

// ---------------------------------------------------------------------------------------------------------------
// The tables: written once, checked against the interfaces by `satisfies`.

const string = { type: 'string' } as const;
const integer = { type: 'integer' } as const;
const amounts = { type: 'object', fields: { cpu: { ...string, required: false }, memory: { ...string, required: false } } } as const;
const requirements = {
  type: 'object',
  fields: { requests: { ...amounts, required: false }, limits: { ...amounts, required: false } },
} as const;
const conditions = {
  type: 'array',
  items: {
    type: 'object',
    fields: {
      type: { ...string, required: true },
      status: { type: 'string', enum: { True: true, False: true, Unknown: true }, required: true },
      reason: { ...string, required: true },
      message: { ...string, required: true },
      lastTransitionTime: { ...string, required: true },
      observedGeneration: { ...integer, required: false },
    },
  },
  required: false,
} as const;

const projectSpec = {
  displayName: { ...string, required: false },
  dataPlane: { type: 'object', fields: { host: { ...string, required: false } }, required: false },
  runtime: {
    type: 'object',
    fields: {
      image: { ...string, required: false },
      replicas: { ...integer, required: false },
      resources: { ...requirements, required: false },
    },
    required: false,
  },
  quota: {
    type: 'object',
    fields: { requests: { ...amounts, required: false }, limits: { ...amounts, required: false }, pods: { ...integer, required: false } },
    required: false,
  },
  containerDefaults: { ...requirements, required: false },
  computer: { type: 'object', fields: { maxSandboxes: { ...integer, required: false } }, required: false },
} as const satisfies Fields<ProjectSpec>;

const projectStatus = {
  observedGeneration: { ...integer, required: false },
  conditions,
  namespace: { ...string, required: false },
  dataPlaneUrl: { ...string, required: false },
  runtimeUrl: { ...string, required: false },
} as const satisfies Fields<ProjectStatus>;

const tenantSpec = {
  tenantId: { ...string, required: true },
  project: { ...string, required: true },
  displayName: { ...string, required: false },
  settings: { type: 'any-json-object', required: false },
} as const satisfies Fields<TenantSpec>;

const tenantStatus = {
  observedGeneration: { ...integer, required: false },
  conditions,
  registrationAttemptedAt: { ...string, required: false },
  registeredAt: { ...string, required: false },
  erase: {
    type: 'object',
    fields: {
      complete: { type: 'boolean', required: true },
      erasedAt: { ...string, required: true },
      rowsDeleted: { type: 'map', values: integer, required: false },
      steps: {
        type: 'array',
        items: {
          type: 'object',
          fields: {
            step: { ...string, required: true },
            phase: { type: 'string', enum: { stop_work: true, sandboxes: true, rows: true, outside_database: true }, required: true },
            outcome: { type: 'string', enum: { done: true, failed: true, already_done: true, not_run: true }, required: true },
            items: { ...integer, required: false },
            error: { ...string, required: false },
          },
        },
        required: true,
      },
    },
    required: false,
  },
} as const satisfies Fields<TenantStatus>;

/** apiVersion, kind and metadata are the API server's own: only their presence is checked. */
const kubernetes = { type: 'kubernetes', required: false } as const;

const projectRoot = {
  apiVersion: kubernetes,
  kind: kubernetes,
  metadata: kubernetes,
  ...({
    spec: { type: 'object', fields: projectSpec, required: true },
    status: { type: 'object', fields: projectStatus, required: false },
  } as const satisfies Fields<Pick<Project, 'spec' | 'status'>>),
} satisfies Record<keyof Project, AnyField>;

const tenantRoot = {
  apiVersion: kubernetes,
  kind: kubernetes,
  metadata: kubernetes,
  ...({
    spec: { type: 'object', fields: tenantSpec, required: true },
    status: { type: 'object', fields: tenantStatus, required: false },
  } as const satisfies Fields<Pick<Tenant, 'spec' | 'status'>>),
} satisfies Record<keyof Tenant, AnyField>;

// ---------------------------------------------------------------------------------------------------------------
// Reading the CRDs.

interface Schema {
  type?: string;
  description?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  additionalProperties?: Schema | boolean;
  enum?: unknown[];
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-list-type'?: string;
  'x-kubernetes-list-map-keys'?: string[];
}

interface CrdVersion {
  name: string;
  served: boolean;
  storage: boolean;
  subresources?: { status?: object };
  additionalPrinterColumns?: { name: string; type: string; jsonPath: string; priority?: number }[];
  schema: { openAPIV3Schema: Schema };
}

interface Crd {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec: {
    group: string;
    scope: 'Cluster' | 'Namespaced';
    names: { kind: string; plural: string; singular: string; shortNames?: string[]; categories?: string[] };
    versions: CrdVersion[];
  };
}

function readCrd(file: string): Crd {
  return parse(readFileSync(new URL(`../../../crds/${file}`, import.meta.url), 'utf8')) as Crd;
}

function onlyVersion(crd: Crd): CrdVersion {
  expect(crd.spec.versions.map((v) => v.name)).toEqual([VERSION]);
  return crd.spec.versions[0]!;
}

/** Walks a schema node against a table entry, collecting every difference under its path. */
function compare(path: string, schema: Schema | undefined, field: AnyField, problems: string[]): void {
  if (!schema) {
    problems.push(`${path}: in the TypeScript type but not in the CRD`);
    return;
  }
  switch (field.type) {
    case 'kubernetes':
      return;
    case 'string':
    case 'integer':
    case 'boolean':
      if (schema.type !== field.type) problems.push(`${path}: CRD type ${schema.type}, TypeScript ${field.type}`);
      if (field.type === 'string' && field.enum) {
        const expected = Object.keys(field.enum).sort();
        const actual = (schema.enum ?? []).map(String).sort();
        if (JSON.stringify(actual) !== JSON.stringify(expected)) problems.push(`${path}: CRD enum [${actual}], TypeScript [${expected}]`);
      } else if (schema.enum) {
        problems.push(`${path}: CRD has an enum, TypeScript a plain ${field.type}`);
      }
      return;
    case 'array':
      if (schema.type !== 'array') problems.push(`${path}: CRD type ${schema.type}, TypeScript an array`);
      compare(`${path}[]`, schema.items, field.items, problems);
      return;
    case 'map':
      if (schema.type !== 'object' || schema.properties || typeof schema.additionalProperties !== 'object') {
        problems.push(`${path}: CRD is not a map (an object with additionalProperties only), TypeScript a Record`);
        return;
      }
      compare(`${path}{}`, schema.additionalProperties, field.values, problems);
      return;
    case 'any-json-object':
      if (schema.type !== 'object' || schema.properties || schema.additionalProperties || !schema['x-kubernetes-preserve-unknown-fields']) {
        problems.push(`${path}: CRD is not an object of any JSON (x-kubernetes-preserve-unknown-fields), TypeScript Record<string, unknown>`);
      }
      return;
    case 'object':
      compareObject(path, schema, field.fields, problems);
      return;
  }
}

function compareObject(path: string, schema: Schema, fields: Record<string, AnyField>, problems: string[]): void {
  if (schema.type !== 'object') problems.push(`${path}: CRD type ${schema.type}, TypeScript an object`);
  const properties = schema.properties ?? {};
  for (const name of Object.keys(properties)) {
    if (!(name in fields)) problems.push(`${path}.${name}: in the CRD but not in the TypeScript type`);
  }
  const required = new Set(schema.required ?? []);
  for (const [name, field] of Object.entries(fields)) {
    compare(`${path}.${name}`, properties[name], field, problems);
    if (properties[name] && (field.required ?? false) !== required.has(name)) {
      problems.push(`${path}.${name}: ${required.has(name) ? 'required' : 'optional'} in the CRD, ${field.required ? 'required' : 'optional'} in TypeScript`);
    }
  }
}

/** Paths of schema nodes without a description; metadata is the API server's (it forbids describing it here). */
function undescribed(path: string, schema: Schema, out: string[]): string[] {
  if (path === '.metadata') return out;
  if (!schema.description?.trim()) out.push(path || '(root)');
  for (const [name, child] of Object.entries(schema.properties ?? {})) undescribed(`${path}.${name}`, child, out);
  if (schema.items) undescribed(`${path}[]`, schema.items, out);
  if (typeof schema.additionalProperties === 'object') undescribed(`${path}{}`, schema.additionalProperties, out);
  return out;
}

/** The schema node a printer column's JSONPath reads (filters such as `[?(@.type=="Ready")]` pick array items). */
function nodeAt(root: Schema, jsonPath: string): Schema | undefined {
  let node: Schema | undefined = root;
  for (const part of jsonPath.replace(/\[\?\(.*?\)\]/g, '[]').split('.').filter(Boolean)) {
    const name = part.replace(/\[\]$/, '');
    node = node?.properties?.[name];
    if (part.endsWith('[]')) node = node?.items;
  }
  return node;
}

const crds = [
  { file: 'project.yaml', crd: readCrd('project.yaml'), plural: PROJECTS, kind: 'Project', fields: projectRoot },
  { file: 'tenant.yaml', crd: readCrd('tenant.yaml'), plural: TENANTS, kind: 'Tenant', fields: tenantRoot },
];

describe.each(crds.map((c) => [c.file, c] as const))('crds/%s', (_file, { crd, plural, kind, fields }) => {
  const version = onlyVersion(crd);
  const root = version.schema.openAPIV3Schema;

  it('names the resource as resources.ts does', () => {
    expect(crd.metadata.name).toBe(`${plural}.${GROUP}`);
    expect(crd.spec.group).toBe(GROUP);
    expect(crd.spec.names.kind).toBe(kind);
    expect(crd.spec.names.plural).toBe(plural);
    expect(`${crd.spec.group}/${version.name}`).toBe(API_VERSION);
    expect(version.served && version.storage).toBe(true);
    expect(crd.spec.names.categories).toContain('agentplane');
    expect(crd.metadata.labels?.['app.kubernetes.io/part-of']).toBe('agentplane');
  });

  it('has the fields of the TypeScript types, with their types and optionality', () => {
    const problems: string[] = [];
    compareObject('', root, fields, problems);
    expect(problems).toEqual([]);
  });

  it('describes every field, so kubectl explain teaches', () => {
    expect(undescribed('', root, [])).toEqual([]);
  });

  it('has a status subresource, so spec writers cannot change status', () => {
    expect(version.subresources?.status).toEqual({});
  });

  it('shows Ready, Reason and Age, and every printer column reads a field the schema has', () => {
    const columns = version.additionalPrinterColumns ?? [];
    expect(columns.map((c) => c.name)).toEqual(expect.arrayContaining(['Ready', 'Reason', 'Age']));
    for (const column of columns.filter((c) => !c.jsonPath.startsWith('.metadata.'))) {
      expect(nodeAt(root, column.jsonPath), column.jsonPath).toBeDefined();
    }
  });

  it('keys its conditions by type, as metav1.Condition lists are', () => {
    const list = root.properties?.status?.properties?.conditions;
    expect(list?.['x-kubernetes-list-type']).toBe('map');
    expect(list?.['x-kubernetes-list-map-keys']).toEqual(['type']);
  });
});

describe('the CRDs', () => {
  it('scope Project to the cluster and Tenant to its project namespace', () => {
    expect(crds.map(({ crd }) => [crd.spec.names.kind, crd.spec.scope])).toEqual([
      ['Project', 'Cluster'],
      ['Tenant', 'Namespaced'],
    ]);
  });
});
