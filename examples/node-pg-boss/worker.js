// A fencelab worker (protocol 1: docs/worker-protocol.md) that takes its work from
// npm's `pg-boss`, a job queue on PostgreSQL: `boss.fetch(queue)` takes the job
// (`SELECT ... FOR UPDATE SKIP LOCKED`, then `state = 'active'`), `boss.complete`
// finishes it. There is no lock: the job is the worker's while it is active, and
// pg-boss's maintenance (every second here) fails a job active longer than its
// `expireInSeconds` and puts it back for a retry, which the next fetch takes with
// `retryCount` one higher.
//
// What a pause does to it: SIGSTOP freezes A holding the job object; its job expires,
// maintenance (B's pg-boss: A's is frozen too) puts it back, and B fetches it, does
// it and completes it. A wakes and does the job again: its write lands after B's, a
// job done twice, and nothing in pg-boss stops it.
//
//   fencelab run examples/node-pg-boss/pause.toml --fencing off
//   fencelab run examples/node-pg-boss/pause.toml --fencing on --program "node worker.js --fenced"
//
// The queue is FENCELAB_KEY, `<schema>.<queue>`: pg-boss makes its tables in the run's
// own schema, dropped with the run. Each worker sends the one job with the same id,
// so the queue holds one job however many workers start. The grant's name, which the
// observer reads in pg-boss's table, is `<job id>:<retry count>`. `--fenced` sends
// the job's try (`retryCount + 1`) as the token: a later fetch's is higher. Driven
// mode only: fencelab sends each step.
"use strict";

const readline = require("node:readline");
const PgBoss = require("pg-boss");

const say = (event) => process.stdout.write(JSON.stringify(event) + "\n");
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const fenced = process.argv.includes("--fenced");
/** The one job every worker sends: the same id, so pg-boss keeps one. */
const JOB = "00000000-0000-4000-8000-000000000001";

const lines = readline.createInterface({ input: process.stdin });
const inbox = [];
let wake = null;
lines.on("line", (line) => {
  inbox.push(JSON.parse(line));
  if (wake) wake();
});
lines.on("close", () => process.exit(0));

/** The next line fencelab sends (its first is the hello). */
async function next() {
  while (inbox.length === 0) await new Promise((resolve) => (wake = resolve));
  return inbox.shift();
}

/** Storage writes go through fencelab: a request line, then its answer on stdin. */
const answers = new Map();
let writes = 0;
function write(value, token) {
  const id = ++writes;
  say(token === undefined ? { event: "write", id, value } : { event: "write", id, value, token });
  return new Promise((resolve) => answers.set(id, resolve));
}

async function main() {
  const hello = await next();
  const [schema, queue] = hello.key.split(".");
  const boss = new PgBoss({
    connectionString: hello.servers.postgres,
    password: hello.servers.password,
    schema,
    max: 2,
    maintenanceIntervalSeconds: 1,
  });
  boss.on("error", (e) => process.stderr.write(`pg-boss: ${e.message}\n`));
  await boss.start();
  // Jobs expire in whole seconds: round the lease up.
  const expireInSeconds = Math.max(1, Math.ceil(hello.lease_ms / 1000));
  try {
    await boss.createQueue(queue);
  } catch (e) {
    // Another worker made it first.
    if (!(await boss.getQueue(queue))) throw e;
  }
  await boss.send(queue, { report: true }, { id: JOB, expireInSeconds, retryLimit: 100, retryDelay: 0 });
  say({ event: "ready" });
  let job = null;
  let token;

  const steps = {
    async acquire(step) {
      const started = Date.now();
      let told = false;
      while (!job) {
        [job] = await boss.fetch(queue, { includeMetadata: true });
        if (job) break;
        if (!told) say({ event: "waiting" });
        told = true;
        if (step.give_up_ms !== undefined && Date.now() - started >= step.give_up_ms) {
          say({ event: "gave_up", reason: `no job after ${step.give_up_ms} ms` });
          return;
        }
        await sleep(50);
      }
      token = fenced ? job.retryCount + 1 : undefined;
      const value = `${job.id}:${job.retryCount}`;
      say(token === undefined ? { event: "acquired", value } : { event: "acquired", value, token });
    },
    async write(step) {
      const result = await write(step.value, token);
      if (!result.accepted) process.stderr.write(`write refused: ${result.reason}\n`);
    },
    async release() {
      if (!job) return;
      const done = await boss.complete(queue, job.id);
      job = null;
      if (done.affected > 0) say({ event: "released" });
      else say({ event: "release_failed", reason: "pg-boss's complete changed no job: it was no longer active" });
    },
  };

  for (;;) {
    const message = await next();
    if (message.type === "write_result") {
      const resolve = answers.get(message.id);
      answers.delete(message.id);
      if (resolve) resolve(message);
    } else if (message.type === "stop") {
      process.exit(0);
    } else if (message.type === "step") {
      const step = steps[message.step];
      if (!step) {
        say({ event: "error", message: `this example does no ${message.step} step` });
        continue;
      }
      // Run the step while answers keep arriving (a write waits for its answer).
      step(message)
        .then(() => say({ event: "done", step: message.step }))
        .catch((e) => {
          say({ event: "error", message: e.message });
          process.exit(1);
        });
    }
  }
}

main().catch((e) => {
  say({ event: "error", message: e.message });
  process.exit(1);
});
