// A fencelab worker (protocol 1: docs/worker-protocol.md) whose lock is npm's `etcd3`:
// `client.lock(name).ttl(seconds)`, a lease and a transaction that creates the key on
// it only if nobody has it (the key holds nothing: its lease says whose it is), the
// lease kept alive in the background, `release()` revoking it.
//
// What a pause does to it: SIGSTOP stops the keep-alive with everything else; etcd
// expires the lease and deletes the key; another worker creates it. After the wake the
// lease emits `lost` within a few ms (reported as `lost`), but the write is the next
// thing the program does, and nothing in it waits for that news.
//
//   fencelab run examples/node-etcd3/pause.toml --fencing off
//   fencelab run examples/node-etcd3/pause.toml --fencing on --program "node worker.js --fenced"
//
// `--fenced` reads the lock key's `create_revision` right after each grant (etcd's
// revision counts every change, so a later grant's is higher) and sends it with the
// writes. Driven mode only: fencelab sends each step.
"use strict";

const readline = require("node:readline");
const { Etcd3, EtcdLockFailedError } = require("etcd3");

const say = (event) => process.stdout.write(JSON.stringify(event) + "\n");
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const fenced = process.argv.includes("--fenced");

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
  const client = new Etcd3({ hosts: hello.servers.etcd, dialTimeout: 10000 });
  // etcd leases last whole seconds: round the lease up.
  const ttl = Math.max(1, Math.ceil(hello.lease_ms / 1000));
  await client.get(hello.key).string(); // connected
  say({ event: "ready" });
  let lock = null;
  let token;

  /** The lock key's create_revision while the key is on `lease`, else undefined. */
  async function revisionOn(lease) {
    const kv = (await client.get(hello.key).exec()).kvs[0];
    return kv !== undefined && kv.lease === lease ? Number(kv.create_revision) : undefined;
  }

  const steps = {
    async acquire() {
      let told = false;
      let lease;
      for (;;) {
        lock = client.lock(hello.key).ttl(ttl);
        try {
          await lock.acquire();
          // Whose the key is: etcd3 stores nothing in it, its lease names the holder.
          lease = await lock.leaseId();
          // Fenced, the grant's token is its key's create_revision, read while the
          // key is still on our lease; a grant lost before that is taken again.
          token = fenced ? await revisionOn(lease) : undefined;
          if (!fenced || token !== undefined) break;
        } catch (e) {
          if (!(e instanceof EtcdLockFailedError)) throw e;
          if (!told) say({ event: "waiting" });
          told = true;
          await sleep(50);
        }
      }
      let once = false;
      lock.lease.on("lost", (e) => {
        if (!once) say({ event: "lost", reason: `etcd3's lease said: ${e.message}` });
        once = true;
      });
      say(token === undefined ? { event: "acquired", value: lease } : { event: "acquired", value: lease, token });
    },
    async write(step) {
      const result = await write(step.value, token);
      if (!result.accepted) process.stderr.write(`write refused: ${result.reason}\n`);
    },
    async release() {
      try {
        await lock.release();
        say({ event: "released" });
      } catch (e) {
        say({ event: "release_failed", reason: e.message });
      }
    },
    async check() {
      // What etcd3 can tell: whether the key is still on our lease.
      const kv = (await client.get(hello.key).exec()).kvs[0];
      say({ event: "checked", owner: kv !== undefined && kv.lease === (await lock.leaseId()) });
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
