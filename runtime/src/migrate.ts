// `npm run migrate`: applies the runtime's migrations to the configured database and exits.
import { openDatabase } from '@agentplane/lib/db/database';
import { migrate } from '@agentplane/lib/db/migrate';
import { loadConfigOrExit } from '@agentplane/lib/program';
import { loadRuntimeConfig } from './config.js';
import { runtimeMigrations } from './store/migrations.js';

const config = loadConfigOrExit(() => loadRuntimeConfig(process.env, { serving: false }));
try {
  const database = await openDatabase(config.database);
  try {
    const outcome = await migrate(database.db, runtimeMigrations);
    const applied = outcome.applied.map((m) => `${m.version} ${m.name}`);
    console.log(applied.length > 0 ? `applied: ${applied.join(', ')}` : 'nothing to apply');
    console.log(`schema version ${outcome.version}`);
  } finally {
    await database.close();
  }
} catch (error) {
  console.error(`migration failed: ${(error as Error).message}`);
  process.exit(1);
}
