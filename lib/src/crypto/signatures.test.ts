import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { signatureHeader, signatureOf, verifySignature } from './signatures.js';

describe('delivery signatures', () => {
  const body = JSON.stringify({ tool: 'lookup_order', arguments: { id: 'A-1' } });

  it('are sha256= and the hex HMAC-SHA256 of the raw body, as any receiver computes it', () => {
    expect(signatureOf('whsec_one', body)).toBe(`sha256=${createHmac('sha256', 'whsec_one').update(body).digest('hex')}`);
  });

  it('carry one value per live secret, newest first, and verify under either', () => {
    const header = signatureHeader(['whsec_new', 'whsec_old'], body);
    expect(header.split(',')).toEqual([signatureOf('whsec_new', body), signatureOf('whsec_old', body)]);
    expect(verifySignature(header, body, 'whsec_new')).toBe(true);
    expect(verifySignature(header, body, 'whsec_old')).toBe(true);
    expect(verifySignature(header, body, 'whsec_other')).toBe(false);
  });

  it('refuse a changed body, a missing header and a truncated value', () => {
    const header = signatureHeader(['whsec_one'], body);
    expect(verifySignature(header, `${body} `, 'whsec_one')).toBe(false);
    expect(verifySignature(undefined, body, 'whsec_one')).toBe(false);
    expect(verifySignature(header.slice(0, -1), body, 'whsec_one')).toBe(false);
  });
});
