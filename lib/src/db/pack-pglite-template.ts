// Run by `npm run build` once the code is compiled: makes the fresh data dir a first start copies (pglite-template.ts).
import { ensurePgliteTemplate } from './pglite-template.js';

const { dir, created } = await ensurePgliteTemplate();
console.log(created ? `made a fresh PGlite data dir in ${dir}` : `PGlite template up to date: ${dir}`);
