import { describe, expect, it } from 'vitest';
import { CAPABILITIES, type Capability } from './catalogue.js';
import {
  didYouMean,
  inheritModalities,
  intersectAllowList,
  resolveRequestedCapabilities,
  tighterEffort,
  tighterLimit,
} from './grant.js';

const everything = { capabilities: CAPABILITIES };

describe('resolveRequestedCapabilities', () => {
  it('drops unknown names with a did-you-mean hint', () => {
    const requested = ['chat', 'web-search', 'document:read', 'memroy'];
    const { granted, warnings } = resolveRequestedCapabilities(requested, everything);
    expect(granted.filter((c) => !c.includes(':') || c.startsWith('documents'))).toEqual(['chat']);
    expect(warnings).toEqual([
      "unknown capability 'document:read' was not granted; did you mean 'documents:read'?",
      "unknown capability 'memroy' was not granted; did you mean 'memory'?",
      "unknown capability 'web-search' was not granted; did you mean 'web_search'?",
    ]);
  });

  it('gives no hint when nothing is close', () => {
    expect(resolveRequestedCapabilities(['teleport'], everything).warnings).toEqual([
      "unknown capability 'teleport' was not granted",
    ]);
    expect(didYouMean('foo')).toBeUndefined();
    expect(didYouMean('Browser')).toBe('browser');
    expect(didYouMean('output:imag')).toBe('output:image');
  });

  it('drops names outside the ceiling and says which', () => {
    const ceiling = { capabilities: ['chat', 'documents:read'] as Capability[] };
    expect(resolveRequestedCapabilities(['chat', 'browser', 'web_search'], ceiling)).toEqual({
      granted: ['chat'],
      warnings: [
        "capability 'browser' was not granted: it is not in the project's ceiling",
        "capability 'web_search' was not granted: it is not in the project's ceiling",
      ],
    });
  });

  it('never grants documents:write on a read-only project, even when the ceiling lists it', () => {
    const ceiling = { capabilities: ['chat', 'documents:read', 'documents:write'] as Capability[], readOnly: true };
    expect(resolveRequestedCapabilities(['documents:read', 'documents:write'], ceiling)).toEqual({
      granted: ['documents:read'],
      warnings: ["capability 'documents:write' was not granted: the project is read-only"],
    });
  });

  it('is deterministic: sorted, duplicates and order of the request do not matter', () => {
    const a = resolveRequestedCapabilities(['memory', 'chat', 'nope', 'chat', 'browser'], everything);
    const b = resolveRequestedCapabilities(['browser', 'nope', 'memory', 'chat'], everything);
    expect(a).toEqual(b);
    expect(a.granted).toEqual([...a.granted].sort());
  });
});

describe('modality inheritance (SPEC.md Authentication 10)', () => {
  const ceiling = {
    capabilities: ['chat', 'input:file', 'input:image', 'output:file', 'output:image', 'output:audio'] as Capability[],
  };

  it('inherits both sides from the ceiling when the request lists none', () => {
    expect(resolveRequestedCapabilities(['chat'], ceiling).granted).toEqual([
      'chat', 'input:file', 'input:image', 'output:audio', 'output:file', 'output:image',
    ]);
  });

  it('naming any output kind narrows that side to exactly what is listed; input still inherits', () => {
    expect(resolveRequestedCapabilities(['chat', 'output:image'], ceiling).granted).toEqual([
      'chat', 'input:file', 'input:image', 'output:image',
    ]);
  });

  it('narrows the input side the same way', () => {
    expect(resolveRequestedCapabilities(['chat', 'input:file'], ceiling).granted).toEqual([
      'chat', 'input:file', 'output:audio', 'output:file', 'output:image',
    ]);
  });

  it('never exceeds the ceiling: a named kind outside it leaves that side empty', () => {
    const { granted, warnings } = resolveRequestedCapabilities(['chat', 'output:video'], ceiling);
    expect(granted).toEqual(['chat', 'input:file', 'input:image']);
    expect(warnings).toEqual(["capability 'output:video' was not granted: it is not in the project's ceiling"]);
  });

  it('treats a misspelt kind as naming its side, so a typo fails closed', () => {
    const { granted } = resolveRequestedCapabilities(['chat', 'output:imag'], ceiling);
    expect(granted.filter((c) => c.startsWith('output:'))).toEqual([]);
  });

  it('inheritModalities returns only the inherited side', () => {
    expect(inheritModalities(['output:file'], ceiling.capabilities)).toEqual(['input:file', 'input:image']);
  });
});

describe('limits', () => {
  it('tighterEffort orders minimal < low < medium < high; unset is no ceiling', () => {
    expect(tighterEffort('high', 'low')).toBe('low');
    expect(tighterEffort('minimal', 'medium')).toBe('minimal');
    expect(tighterEffort(undefined, 'medium')).toBe('medium');
    expect(tighterEffort('high', undefined)).toBe('high');
    expect(tighterEffort(undefined, undefined)).toBeUndefined();
  });

  it('tighterLimit takes the lowest set limit', () => {
    expect(tighterLimit(10, undefined, 4)).toBe(4);
    expect(tighterLimit(undefined, undefined)).toBeUndefined();
    expect(tighterLimit(0, 5)).toBe(0);
  });

  it('intersectAllowList treats unset as everything and an empty list as nothing', () => {
    expect(intersectAllowList(undefined, undefined)).toBeUndefined();
    expect(intersectAllowList(['b', 'a'], undefined)).toEqual(['a', 'b']);
    expect(intersectAllowList(['a', 'b'], ['b', 'c'])).toEqual(['b']);
    expect(intersectAllowList(['a'], ['c'])).toEqual([]);
  });
});
