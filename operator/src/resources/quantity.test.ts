import { describe, expect, it } from 'vitest';
import { exceeds, quantityValue } from './quantity.js';

describe('quantities', () => {
  it('reads the forms Kubernetes writes', () => {
    expect(quantityValue('500m')).toBe(0.5);
    expect(quantityValue('2')).toBe(2);
    expect(quantityValue('1.5Gi')).toBe(1.5 * 2 ** 30);
    expect(quantityValue('128Mi')).toBe(128 * 2 ** 20);
    expect(quantityValue('1G')).toBe(1e9);
    expect(quantityValue('1E')).toBe(1e18);
    expect(quantityValue('12e3')).toBe(12_000);
    expect(quantityValue('.5')).toBe(0.5);
    expect(quantityValue('lots')).toBeUndefined();
    expect(quantityValue('1GB')).toBeUndefined();
  });

  it('compares across units, and never claims an order for something that is not a quantity', () => {
    expect(exceeds('256Mi', '128Mi')).toBe(true);
    expect(exceeds('1Gi', '1G')).toBe(true);
    expect(exceeds('1', '1000m')).toBe(false);
    expect(exceeds('250m', '1')).toBe(false);
    expect(exceeds('lots', '1')).toBe(false);
  });
});
