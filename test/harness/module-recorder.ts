// Loaded with `--import` into a program a test starts: notes the URL of every module the process loads and, as it
// exits, writes them one per line to the file named by MODULE_RECORD, so the test can see what a start left unloaded.
import { writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const file = process.env.MODULE_RECORD;
if (!file) throw new Error('module-recorder: set MODULE_RECORD to the file to write');
const loaded = new Set<string>();
registerHooks({
  load(url, context, nextLoad) {
    loaded.add(url);
    return nextLoad(url, context);
  },
});
process.on('exit', () => writeFileSync(file, [...loaded].join('\n')));
