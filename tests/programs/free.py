"""A free-running fencelab worker (no steps: it runs its own logic and reports), for
tests/foreign.rs: takes redis-py's Lock, writes once, releases, exits."""

import json
import os
import sys

import redis


def say(**event):
    print(json.dumps(event), flush=True)


sys.stdin.readline()
client = redis.Redis.from_url(os.environ["FENCELAB_REDIS_URL"])
lock = client.lock(os.environ["FENCELAB_KEY"], timeout=int(os.environ["FENCELAB_LEASE_MS"]) / 1000)
say(event="ready")
assert json.loads(sys.stdin.readline())["type"] == "start"
lock.acquire()
say(event="acquired", value=lock.local.token.decode())
say(event="write", id=1, value="free " + os.environ["FENCELAB_WORKER"])
answer = json.loads(sys.stdin.readline())
assert answer["type"] == "write_result" and answer["id"] == 1, answer
try:
    lock.release()
    say(event="released")
except redis.exceptions.LockNotOwnedError as e:
    say(event="release_failed", reason=str(e))
