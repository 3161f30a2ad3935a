// The Graphile Worker side of settle-bench (the peer runs as itself, in Node).
// graphile-worker is installed by bench/peers.sh into $SETTLE_PEERS_DIR, never
// into this repository.
//
//   node bench/graphile.cjs prepare HOST PORT USER DB JOBS
//   node bench/graphile.cjs run     HOST PORT USER DB JOBS WORKERS BATCH
//
// prepare: a fresh graphile_worker schema and JOBS jobs of task `t`.
// run: WORKERS concurrent jobs, BATCH jobs fetched per query (Graphile's
// localQueue; 1 = off) and completions batched when BATCH > 1; the task does
// nothing. Prints one JSON line: jobs, seconds, client CPU seconds.
'use strict';
const path = require('path');
const dir = process.env.SETTLE_PEERS_DIR || '/tmp/settle-peers';
const gw = require(path.join(dir, 'node_modules', 'graphile-worker'));
const { Pool } = require(path.join(dir, 'node_modules', 'pg'));

async function main() {
  const [mode, host, port, user, database, jobsArg, workersArg, batchArg] = process.argv.slice(2);
  const jobs = Number(jobsArg);
  const workers = Number(workersArg || 1);
  const batch = Number(batchArg || 1);
  const pgPool = new Pool({ host, port: Number(port), user, database, max: workers + 2 });
  const logger = new gw.Logger(() => () => {});
  if (mode === 'prepare') {
    await pgPool.query('DROP SCHEMA IF EXISTS graphile_worker CASCADE');
    const utils = await gw.makeWorkerUtils({ pgPool, logger });
    await utils.migrate();
    for (let i = 0; i < jobs; i += 1000) {
      const specs = [];
      for (let n = i + 1; n <= Math.min(jobs, i + 1000); n++) specs.push({ identifier: 't', payload: { n } });
      await utils.addJobs(specs);
    }
    await pgPool.query('VACUUM ANALYZE');
    await utils.release();
    await pgPool.end();
    return;
  }
  let done = 0;
  let finish;
  const finished = new Promise((r) => (finish = r));
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  const runner = await gw.run({
    pgPool,
    logger,
    concurrency: workers,
    noHandleSignals: true,
    pollInterval: 1000,
    preset: {
      worker: batch > 1 ? { localQueue: { size: batch }, completeJobBatchDelay: 0 } : {},
    },
    taskList: {
      t: async () => {
        done++;
        if (done === jobs) finish();
      },
    },
  });
  await finished;
  await runner.stop(); // flushes batched completions
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  // the last completion can land just after stop() returns (seen once, under
  // load): wait up to 5 s for it, outside the clock
  let left;
  for (let i = 0; i < 50; i++) {
    left = await pgPool.query('SELECT count(*)::int AS n FROM graphile_worker.jobs');
    if (left.rows[0].n === 0) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await pgPool.end();
  console.log(JSON.stringify({ jobs: done, left: left.rows[0].n, secs, client_cpu: (cpu.user + cpu.system) / 1e6 }));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
