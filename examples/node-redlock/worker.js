// A fencelab worker (protocol 1: docs/worker-protocol.md) whose lock is Node's `redlock`
// package over `ioredis`, on the Redlock deployment's nodes fencelab hands it.
//
// The lock code is what a user of redlock writes: `redlock.lock(key, ttl)`, then the
// work, then `lock.unlock()`. Nothing here checks the lease before writing, and
// Redlock has no fencing token: that is the point. A pause (SIGSTOP) longer than the
// lease lets another worker take the lock; when this one wakes, its write still
// lands. Lesson 12 says it of Redlock; this program shows it of the real client.
//
// driven mode: fencelab sends the scenario's steps (acquire, write, check, renew, release)
// and this program does each with redlock, then says "done".
// free mode:   it runs its own logic once: lock, work for half the lease, write its
//              name, unlock, and exit (a free-running worker's run ends when it exits).
"use strict";

const readline = require("node:readline");
const Redis = require("ioredis");
const Redlock = require("redlock");

const say = (event) => process.stdout.write(JSON.stringify(event) + "\n");
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

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
function write(value) {
  const id = ++writes;
  say({ event: "write", id, value });
  return new Promise((resolve) => answers.set(id, resolve));
}

async function main() {
  const hello = await next();
  const nodes = hello.servers.redis_nodes || [hello.servers.redis];
  const key = hello.key;
  const leaseMs = hello.lease_ms;
  // Every command has a deadline; a node that is down answers with an error, which
  // redlock counts as a vote against (it needs a majority).
  // The password, when the servers have one, comes only in the hello line.
  const options = { lazyConnect: true, maxRetriesPerRequest: 0, commandTimeout: 2000 };
  if (hello.servers.password) options.password = hello.servers.password;
  const clients = nodes.map((url) => new Redis(url, options));
  await Promise.all(clients.map((c) => c.connect()));
  // No retries by default, so an extend of a lost lock fails at once; acquire retries
  // below until it gets the lock, as a worker waiting its turn does.
  const redlock = new Redlock(clients, { retryCount: 0, driftFactor: 0.01 });
  redlock.on("clientError", () => {});
  const retryDelay = Math.max(10, Math.round(leaseMs / 20));
  let lock = null;

  const steps = {
    async acquire() {
      lock = await redlock.lockWithOptions(key, leaseMs, { retryCount: -1, retryDelay });
      say({ event: "acquired", value: lock.value });
    },
    async write(step) {
      const result = await write(step.value);
      if (!result.accepted) say({ event: "error", message: `write refused: ${result.reason}` });
    },
    async renew() {
      try {
        lock = await lock.extend(leaseMs);
        say({ event: "renewed" });
      } catch (e) {
        say({ event: "lost", reason: e.message });
      }
    },
    // What a redlock user can ask: whether the lease it computed is still running.
    async check() {
      say({ event: "checked", owner: lock !== null && lock.expiration > Date.now() });
    },
    async release() {
      try {
        await lock.unlock();
        say({ event: "released" });
      } catch (e) {
        say({ event: "release_failed", reason: e.message });
      }
    },
  };

  say({ event: "ready", key });
  const handle = async (message) => {
    if (message.type === "write_result") {
      const resolve = answers.get(message.id);
      answers.delete(message.id);
      if (resolve) resolve(message);
    } else if (message.type === "stop") {
      process.exit(0);
    }
  };

  if (hello.mode === "free") {
    // Its logic begins when the run reaches this worker's start.
    for (let m = await next(); m.type !== "start"; m = await next()) await handle(m);
    (async () => {
      await steps.acquire();
      await sleep(leaseMs / 2);
      await steps.write({ value: hello.worker });
      await steps.release();
      process.exit(0);
    })().catch((e) => {
      say({ event: "error", message: e.message });
      process.exit(1);
    });
    for (;;) await handle(await next());
  }

  // Driven: steps run one at a time, in order; write answers are handled meanwhile.
  let running = Promise.resolve();
  for (;;) {
    const message = await next();
    if (message.type !== "step") {
      await handle(message);
      continue;
    }
    running = running.then(async () => {
      const run = steps[message.step];
      if (!run) {
        say({ event: "error", message: `unknown step ${JSON.stringify(message.step)}` });
        return;
      }
      try {
        await run(message);
      } catch (e) {
        say({ event: "error", message: `${message.step}: ${e.message}` });
      }
      say({ event: "done", step: message.step });
    });
  }
}

main().catch((e) => {
  say({ event: "error", message: e.message });
  process.exit(1);
});
