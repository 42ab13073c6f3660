import { chatWorld } from '../chat/fixture.js';
const world = await chatWorld({ RUN_LEASE_SECONDS: '3600' });
const token = await world.token();
const N = Number(process.env.N ?? 2000), C = Number(process.env.C ?? 16);
let done = 0;
const t0 = performance.now();
async function worker() {
  while (done < N) {
    done++;
    const r = await world.chat(token, { message: 'Tell me in one sentence what a benchmark is for.' });
    if (r.status !== 200) throw new Error(`${r.status} ${await r.text()}`);
    await r.arrayBuffer();
  }
}
await Promise.all(Array.from({ length: C }, worker));
const s = (performance.now() - t0) / 1000;
console.log(`${N} turns in ${s.toFixed(2)} s = ${(N / s).toFixed(0)}/s; statements ${world.rt.runtime.database.statements()}`);
await world.stop();
process.exit(0);
