import { describe, expect, it } from 'vitest';
import { equalitySelector } from './owned.js';

describe('equalitySelector', () => {
  it('reads the equality terms the operator selects its objects by', () => {
    expect(equalitySelector('agentplane.io/project=alpha,app.kubernetes.io/managed-by=agentplane-operator')).toEqual([
      ['agentplane.io/project', 'alpha'],
      ['app.kubernetes.io/managed-by', 'agentplane-operator'],
    ]);
    expect(equalitySelector('a==b')).toEqual([['a', 'b']]);
    expect(equalitySelector(undefined)).toEqual([]);
  });

  it('leaves other selectors to the API server', () => {
    expect(equalitySelector('a!=b')).toBeUndefined();
    expect(equalitySelector('a in (b,c)')).toBeUndefined();
    expect(equalitySelector('a')).toBeUndefined();
    expect(equalitySelector('!a')).toBeUndefined();
  });
});
