"""Exercise starter (fencelab exercises): a lock of your own on one Redis, as a fencelab
worker (worker-protocol.md, beside it when `fencelab exercises --copy` wrote it; it needs
`pip install redis`). It works until a pause: three parts are unsafe.

  safe-release:  release() deletes the key even when the lease ran out and the key is
                 someone else's now. Delete it only while it still holds our value.
  fencing-token: writes carry no fencing token, so the fenced storage cannot tell a
                 stale write from a fresh one (and refuses every token-less write).
                 Take a token right after each grant and send it with the writes.
  idempotency-key: the payment gateway (lesson 9) cannot check tokens; it applies each
                 idempotency key once, and a write's value is its key. write() makes
                 up a fresh key per attempt, so a retry after a pause pays twice. Send
                 the key that names the job (the step's value) instead.

Check your fix:  fencelab check safe-release --program "python3 starter.py"
"""

import json
import sys
import time
import uuid

import redis


def say(**event):
    print(json.dumps(event), flush=True)


hello = json.loads(sys.stdin.readline())
servers = hello["servers"]
r = redis.Redis.from_url(servers["redis"], password=servers.get("password"), socket_timeout=10)
key, lease_ms = hello["key"], hello["lease_ms"]
me = uuid.uuid4().hex  # the value that says the key is ours
token, writes = None, 0


def acquire():
    global token
    while not r.set(key, me, nx=True, px=lease_ms):
        time.sleep(lease_ms / 20 / 1000)  # taken: ask again soon
    token = None  # TODO fencing-token: a token from the counter at hello["token_key"]
    say(event="acquired", value=me, **({"token": token} if token else {}))


def write(value):
    global writes
    writes += 1
    value = f"{value}/attempt-{uuid.uuid4().hex[:8]}"  # TODO idempotency-key: the job's key
    say(event="write", id=writes, value=value, **({"token": token} if token else {}))
    answer = json.loads(sys.stdin.readline())  # {"type":"write_result",...}
    if not answer["accepted"]:
        print(f"write refused: {answer.get('reason')}", file=sys.stderr)


def release():
    r.delete(key)  # TODO safe-release: only if the key still holds `me`, atomically
    say(event="released")


r.ping()
say(event="ready")
steps = {"acquire": acquire, "release": release}
for line in sys.stdin:
    order = json.loads(line)
    if order["type"] == "stop":
        break
    if order["type"] == "step":
        if order["step"] == "write":
            write(order["value"])
        else:
            steps[order["step"]]()
        say(event="done", step=order["step"])
