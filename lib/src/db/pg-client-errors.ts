// A `pg` pool's clients and the 'error' event of a connection that ends while checked out.
import type pg from 'pg';

/**
 * A client checked out when its connection ends (a dropped database, a restarted server) emits 'error' on itself,
 * which its pool does not listen to (the pool hears only its idle clients'). Unheard, the event ends the process;
 * its statement fails all the same, which the caller sees, so each client gets a listener that only hears it.
 */
export function hearCheckedOutClientErrors(pool: pg.Pool): void {
  pool.on('connect', (client) => {
    client.on('error', () => {});
  });
}
