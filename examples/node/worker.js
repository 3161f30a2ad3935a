// A settle worker in the lease form, with node-postgres (pg).
//
// Runs up to CONCURRENCY async handlers at once: each claim asks for as many
// deliveries as there are free slots, each delivery's lease is extended while
// its handler runs, and each is settled with ack, or retry_after with a
// back-off that grows with the attempt (a poison row reaches max_attempts and
// goes to the dead letter). An idle worker sleeps until queue_notify_trigger's
// NOTIFY says a row arrived, or a second passes (rows that become ready
// later, as retries, send none). SIGTERM or Ctrl-C: no new claims, the
// handlers running finish and settle, then the worker exits.
//
//   PGHOST=... PGDATABASE=app QUEUE=jobs CONCURRENCY=8 node worker.js
//
// Connection settings come from the libpq variables (PGHOST, PGPORT, PGUSER,
// PGDATABASE, PGPASSWORD) or DATABASE_URL.
'use strict';
const { Client, Pool } = require('pg');

const QUEUE = process.env.QUEUE || 'jobs';
const CONCURRENCY = Number(process.env.CONCURRENCY || 4);
const LEASE_MS = 1000 * Number(process.env.LEASE_SECONDS || 30);
const BACKOFF_MS = 1000 * Number(process.env.BACKOFF_SECONDS || 1);
const IDLE_MS = 1000;
const LEASE_LOST = 'SQ001'; // settle's SQLSTATE: the lease went to another claim

const connection = { connectionString: process.env.DATABASE_URL };
const pool = new Pool({ ...connection, max: CONCURRENCY + 1 });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The job itself; throw to have it retried. (Here: simulated work.)
async function handle(payload, attempt) {
  await sleep(payload.work_ms || 0);
  if (payload.poison || attempt <= (payload.fail_first || 0)) throw new Error('simulated failure');
}

// One delivery: the handler, a heartbeat beside it, the settle. queue_extend
// returns a new token and only the newest settles, so the two share it, and
// the settle waits for an extension still on its way.
async function run(job) {
  console.log(`claimed ${job.id} attempt ${job.attempt}`);
  let token = job.token;
  let extending = Promise.resolve();
  const heartbeat = setInterval(() => {
    extending = extending
      .then(() => pool.query('SELECT queue_extend($1, $2, $3, $4)::text AS token',
                             [QUEUE, job.id, token, `${LEASE_MS} milliseconds`]))
      .then((r) => { token = r.rows[0].token; })
      .catch((e) => { if (e.code !== LEASE_LOST) throw e; }); // the settle reports it
  }, LEASE_MS / 3);
  let outcome = 'ack';
  let delayMs = null;
  try {
    await handle(job.payload, job.attempt);
  } catch (e) {
    outcome = 'retry_after';
    delayMs = Math.min(BACKOFF_MS * 2 ** (job.attempt - 1), 3600 * 1000);
    console.log(`failed ${job.id}: ${e.message}`);
  } finally {
    clearInterval(heartbeat);
    await extending;
  }
  try {
    const delay = delayMs === null ? null : `${delayMs} milliseconds`;
    const { rows } = await pool.query('SELECT queue_complete($1, $2, $3, $4, $5) AS result',
                                      [QUEUE, job.id, outcome, delay, token]);
    const result = rows[0].result;
    if (result === 'delayed') console.log(`retry ${job.id} in ${delayMs / 1000}s`);
    else if (result === 'dead_lettered') console.log(`dead ${job.id}`);
    else console.log(`acked ${job.id}`);
  } catch (e) {
    // the lease ran out and another worker has the row now: it runs again
    // there, so handlers must tolerate running twice
    if (e.code !== LEASE_LOST) throw e;
    console.log(`lease lost ${job.id}`);
  }
}

async function main() {
  let stopping = false;
  let woken = false; // something happened since the last claim began
  let interrupt = null; // ends the idle wait
  const wake = () => { woken = true; if (interrupt) interrupt(); };
  const stop = () => { stopping = true; wake(); };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  const listener = new Client(connection);
  await listener.connect();
  listener.on('notification', (n) => { if (n.payload === QUEUE) wake(); });
  await listener.query('LISTEN settle');

  const running = new Set();
  while (!stopping) {
    woken = false;
    const free = CONCURRENCY - running.size;
    let claimed = 0;
    if (free > 0) {
      // the token as text: it goes back exactly as the server wrote it
      const { rows } = await pool.query(
        'SELECT id, attempt, token::text AS token, payload FROM queue_claim($1, $2, $3)',
        [QUEUE, free, `${LEASE_MS} milliseconds`]);
      for (const job of rows) {
        const p = run(job).finally(() => { running.delete(p); wake(); });
        running.add(p);
      }
      claimed = rows.length;
    }
    if ((claimed === 0 || running.size === CONCURRENCY) && !woken) {
      // until a handler finishes, a row arrives, the stop, or IDLE_MS
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, IDLE_MS);
        interrupt = () => { clearTimeout(timer); resolve(); };
      });
      interrupt = null;
    }
  }
  await Promise.all(running);
  await listener.end();
  await pool.end();
  console.log('stopped');
}

main().catch((e) => { console.error(e); process.exit(1); });
