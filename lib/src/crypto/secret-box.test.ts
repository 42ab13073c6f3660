import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretBox, newSecret, secretsEqual } from './secret-box.js';

describe('SecretBox', () => {
  const box = new SecretBox(randomBytes(32));

  it('opens what it sealed, and never stores the plaintext', () => {
    const sealed = box.seal('sk-live-abc', 'tenant:1');
    expect(sealed).not.toContain('sk-live-abc');
    expect(box.open(sealed, 'tenant:1')).toBe('sk-live-abc');
  });

  it('seals the same text differently each time', () => {
    expect(box.seal('x')).not.toBe(box.seal('x'));
  });

  it('refuses a sealed secret moved to another record, tampered with, or sealed under another key', () => {
    const sealed = box.seal('secret', 'tenant:1');
    expect(() => box.open(sealed, 'tenant:2')).toThrow();
    const parts = sealed.split('.');
    const tampered = [...parts.slice(0, 3), Buffer.from('other').toString('base64url')].join('.');
    expect(() => box.open(tampered, 'tenant:1')).toThrow();
    expect(() => new SecretBox(randomBytes(32)).open(sealed, 'tenant:1')).toThrow();
  });

  it('rejects a master key of the wrong size', () => {
    expect(() => new SecretBox(randomBytes(16))).toThrow(/32 bytes/);
  });
});

describe('secrets', () => {
  it('compares by value whatever the lengths', () => {
    expect(secretsEqual('abc', 'abc')).toBe(true);
    expect(secretsEqual('abc', 'abd')).toBe(false);
    expect(secretsEqual('abc', 'abcd')).toBe(false);
  });

  it('makes prefixed secrets with 256 bits of entropy', () => {
    const secret = newSecret('whsec_');
    expect(secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    expect(newSecret('whsec_')).not.toBe(secret);
  });
});
