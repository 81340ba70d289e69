// Exercise starter (fencelab exercises), in Node: a lock of your own on one Redis, as
// a fencelab worker (worker-protocol.md). It works until a pause: three parts are
// unsafe (see starter.py for the same in Python).
//
//   safe-release:    release() deletes the key even when it is someone else's now.
//   fencing-token:   writes carry no fencing token.
//   idempotency-key: each write makes up a fresh idempotency key (its value), so the
//                    payment gateway of lesson 9 pays twice: send the job's own key.
//
// Check your fix:  fencelab check fencing-token --program "node starter.js"
// It needs ioredis: `npm install ioredis` in its folder (in fencelab's repository it
// takes examples/node-redlock's: `npm ci` there once). The protocol it speaks is
// worker-protocol.md, beside it when `fencelab exercises --copy` wrote it.
"use strict";

const path = require("node:path");
const readline = require("node:readline");
const crypto = require("node:crypto");

/** ioredis from beside this file, else from fencelab's examples/node-redlock. */
function ioredis() {
  try {
    return require("ioredis");
  } catch {
    const there = path.join(__dirname, "..", "node-redlock", "package.json");
    return require("node:module").createRequire(there)("ioredis");
  }
}
const Redis = ioredis();

const say = (event) => process.stdout.write(JSON.stringify(event) + "\n");
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const next = async () => JSON.parse((await lines.next()).value);

async function main() {
  const hello = await next();
  const { key, lease_ms: leaseMs, servers } = hello;
  const r = new Redis(servers.redis, { password: servers.password, commandTimeout: 10000 });
  const me = crypto.randomUUID();
  let token = null;
  let writes = 0;
  const steps = {
    async acquire() {
      while ((await r.set(key, me, "PX", leaseMs, "NX")) !== "OK") await sleep(leaseMs / 20);
      token = null; // TODO fencing-token: a token from the counter at hello.token_key
      say({ event: "acquired", value: me, ...(token ? { token } : {}) });
    },
    async write(order) {
      // TODO idempotency-key: the job's key (order.value), not one per attempt.
      const value = `${order.value}/attempt-${crypto.randomUUID().slice(0, 8)}`;
      say({ event: "write", id: ++writes, value, ...(token ? { token } : {}) });
      const answer = await next();
      if (!answer.accepted) process.stderr.write(`write refused: ${answer.reason}\n`);
    },
    async release() {
      await r.del(key); // TODO safe-release: only if the key still holds `me`, atomically
      say({ event: "released" });
    },
  };
  await r.ping();
  say({ event: "ready" });
  for (;;) {
    const order = await next();
    if (order.type === "stop") process.exit(0);
    if (order.type !== "step") continue;
    await steps[order.step](order);
    say({ event: "done", step: order.step });
  }
}

main().catch((e) => {
  say({ event: "error", message: e.message });
  process.exit(1);
});
