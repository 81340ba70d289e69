"""A fencelab worker that takes its lock with redis-py's `redis.lock.Lock`, as a user
of redis-py would write it: the lock named FENCELAB_KEY, its timeout the lease.

fencelab drives it through the scenario's steps (docs/worker-protocol.md): it takes
the lock when told to, asks fencelab to write when told to, and releases. Nothing in
here can notice a pause: under the article's pause its stale write lands.

    fencelab run gc-pause --fencing off --program "python3 examples/python-redis-py/lock.py"
"""

import json
import os
import sys

import redis
from redis.exceptions import LockError


def say(**event):
    """One report on stdout, flushed at once: fencelab reads it as it happens."""
    print(json.dumps(event), flush=True)


def attempt(call, done, failed):
    """Call redis-py; report `done`, or `failed` with why when the lock was not ours."""
    try:
        call()
        say(event=done)
    except LockError as e:
        say(event=failed, reason=str(e))


def run(fencing_token=None):
    """Serve fencelab's steps; `fencing_token(client)` (the fenced twin) returns a
    token to send with each write of the current grant."""
    hello = json.loads(sys.stdin.readline())
    client = redis.Redis.from_url(
        os.environ["FENCELAB_REDIS_URL"],
        password=hello["servers"].get("password"),
        socket_timeout=10,
    )
    lease_s = int(os.environ["FENCELAB_LEASE_MS"]) / 1000
    lock = client.lock(os.environ["FENCELAB_KEY"], timeout=lease_s)
    client.ping()
    say(event="ready")
    token, writes = None, 0
    for line in sys.stdin:
        order = json.loads(line)
        if order["type"] == "stop":
            return
        if order["type"] != "step":
            continue
        step = order["step"]
        if step == "acquire":
            lock.acquire()
            token = fencing_token(client) if fencing_token else None
            grant = {"token": token} if token is not None else {}
            say(event="acquired", value=lock.local.token.decode(), **grant)
        elif step == "write":
            writes += 1
            sent = {"token": token} if token is not None else {}
            say(event="write", id=writes, value=order["value"], **sent)
            answer = json.loads(sys.stdin.readline())
            if not answer["accepted"]:
                print(f"write refused: {answer.get('reason')}", file=sys.stderr)
        elif step == "release":
            attempt(lock.release, "released", "release_failed")
        elif step == "renew":
            attempt(lock.reacquire, "renewed", "lost")
        elif step == "check":
            say(event="checked", owner=lock.owned())
        say(event="done", step=step)


if __name__ == "__main__":
    run()
