// `npm run migrate`: applies the runtime's migrations to the configured database and exits.
import { ConfigError } from '../../lib/src/config.js';
import { openDatabase } from '../../lib/src/db/database.js';
import { migrate } from '../../lib/src/db/migrate.js';
import { loadRuntimeConfig } from './config.js';
import { runtimeMigrations } from './store/migrations.js';

try {
  const config = loadRuntimeConfig();
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
  console.error(error instanceof ConfigError ? error.message : `migration failed: ${(error as Error).message}`);
  process.exit(1);
}
