// Enough of Kubernetes' resource.Quantity to compare two amounts (`500m` < `1`, `512Mi` < `1Gi`). Builders only
// compare; they never rewrite a quantity, so the precision of a float is plenty.

const suffixes: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

const quantityPattern = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?\d+))?$/;

/** The amount a quantity stands for, or undefined when it is not a quantity. */
export function quantityValue(quantity: string): number | undefined {
  const match = quantityPattern.exec(quantity.trim());
  if (!match) return undefined;
  const [, number, suffix, exponent] = match;
  const scale = exponent !== undefined ? 10 ** Number(exponent) : suffixes[suffix ?? ''];
  return Number(number) * (scale ?? 1);
}

/** Whether `a` is larger than `b`; false when either is not a quantity (the API server will say what is wrong). */
export function exceeds(a: string, b: string): boolean {
  const left = quantityValue(a);
  const right = quantityValue(b);
  return left !== undefined && right !== undefined && left > right;
}
