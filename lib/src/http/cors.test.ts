// Origin matching as browsers send origins: exact origins compare as origins, a wildcard allows subdomains only.
import { describe, expect, it } from 'vitest';
import { originAllowed } from './cors.js';

describe('originAllowed', () => {
  const allowed = ['https://app.example.com', 'http://localhost:5173', 'https://*.example.org', 'https://Shop.Example.NET:443'];

  it('allows the listed origins, compared as origins (case and default ports aside)', () => {
    for (const origin of ['https://app.example.com', 'http://localhost:5173', 'https://shop.example.net']) expect(originAllowed(allowed, origin), origin).toBe(true);
  });

  it('refuses another scheme, port or host, and a look-alike suffix', () => {
    for (const origin of [
      'http://app.example.com',
      'https://app.example.com:8443',
      'http://localhost:5174',
      'https://app.example.com.evil.net',
      'https://evilapp.example.com',
      'https://example.org.evil.net',
    ]) {
      expect(originAllowed(allowed, origin), origin).toBe(false);
    }
  });

  it('lets a wildcard cover subdomains at any depth, never the bare host or another port', () => {
    expect(originAllowed(allowed, 'https://a.example.org')).toBe(true);
    expect(originAllowed(allowed, 'https://a.b.example.org')).toBe(true);
    expect(originAllowed(allowed, 'https://example.org')).toBe(false);
    expect(originAllowed(allowed, 'https://a.example.org:444')).toBe(false);
    expect(originAllowed(allowed, 'http://a.example.org')).toBe(false);
  });

  it('refuses what no browser sends as an origin: null, paths, upper case, default ports, other schemes', () => {
    for (const origin of ['null', '', 'https://app.example.com/', 'https://APP.example.com', 'https://app.example.com:443', 'file:///tmp/x', 'chrome-extension://abc']) {
      expect(originAllowed(allowed, origin), origin).toBe(false);
    }
  });

  it('allows nothing when the list is empty', () => {
    expect(originAllowed([], 'https://app.example.com')).toBe(false);
  });
});
