"""A driven fencelab worker that takes its lock with plain commands only (SET NX PX,
PTTL, GET, DEL: what a class's student user may run; no Lua of its own), its value a
UUID as a library's would be (the class gate records who wrote it), for tests/class.rs's
`join --program`."""

import json
import os
import sys
import time
import uuid

import redis


def say(**event):
    print(json.dumps(event), flush=True)


hello = json.loads(sys.stdin.readline())
client = redis.Redis.from_url(
    os.environ["FENCELAB_REDIS_URL"], password=hello["servers"].get("password"), socket_timeout=10
)
key, lease_ms = os.environ["FENCELAB_KEY"], int(os.environ["FENCELAB_LEASE_MS"])
value = None
client.ping()
print(f"plain_lock {os.environ['FENCELAB_WORKER']} ready (pid {os.getpid()})", file=sys.stderr)
say(event="ready")
for line in sys.stdin:
    order = json.loads(line)
    if order["type"] == "stop":
        break
    step = order["step"]
    if step == "acquire":
        value = uuid.uuid4().hex
        while not client.set(key, value, nx=True, px=lease_ms):
            say(event="waiting")
            time.sleep((max(client.pttl(key), 1) + 1) / 1000)
        say(event="acquired", value=value)
    elif step == "write":
        say(event="write", id=1, value=order["value"])
        json.loads(sys.stdin.readline())
    elif step == "release":
        mine = client.get(key) == value.encode()
        if mine:
            client.delete(key)
        say(event="released" if mine else "release_failed")
    elif step == "check":
        say(event="checked", owner=client.get(key) == value.encode())
    elif step == "renew":
        mine = client.get(key) == value.encode() and client.pexpire(key, lease_ms)
        say(event="renewed" if mine else "lost")
    say(event="done", step=step)
