"""A solution to both exercises (safe-release, fencing-token): keep it out of sight of
the starters. A lock of your own on one Redis, as a fencelab worker.

  safe-release:  release() deletes the key even when the lease ran out and the key is
                 someone else's now. Delete it only while it still holds our value.
  fencing-token: writes carry no fencing token, so the fenced storage cannot tell a
                 stale write from a fresh one (and refuses every token-less write).
                 Take a token right after each grant and send it with the writes.

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
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


def acquire():
    global token
    while not r.set(key, me, nx=True, px=lease_ms):
        time.sleep(lease_ms / 20 / 1000)  # taken: ask again soon
    token = r.incr(hello["token_key"])  # one more than the last grant's
    say(event="acquired", value=me, **({"token": token} if token else {}))


def write(value):
    global writes
    writes += 1
    say(event="write", id=writes, value=value, **({"token": token} if token else {}))
    answer = json.loads(sys.stdin.readline())  # {"type":"write_result",...}
    if not answer["accepted"]:
        print(f"write refused: {answer.get('reason')}", file=sys.stderr)


def release():
    # Compare and delete in one script: nothing can come between the two.
    if r.eval(RELEASE, 1, key, me):
        say(event="released")
    else:
        say(event="release_failed", reason="the key was no longer ours")


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
