"""A fencelab worker whose lock is etcd3gw's `Lock`, on etcd's JSON gateway, as a user
of etcd3gw would write it: `client.lock(name, ttl=lease)`, `acquire()` (one try: a
transaction that creates `/locks/<name>` on a fresh lease only if nobody has it), a
write, `release()` (deletes the key only while it holds this lock's uuid).

fencelab drives it through the scenario's steps (docs/worker-protocol.md). etcd3gw
refreshes nothing by itself and tells nothing when the lease runs out: under the
article's pause the key expires, another worker takes it, and this one's write lands.

    fencelab run examples/python-etcd3gw/pause.toml --fencing off
"""

import json
import sys
import time
from urllib.parse import urlparse

from etcd3gw.client import Etcd3Client


def say(**event):
    """One report on stdout, flushed at once: fencelab reads it as it happens."""
    print(json.dumps(event), flush=True)


def take(lock, client, fencing_token):
    """Acquire the lock, waiting for it. The fenced twin then reads its grant's token,
    and takes the lock again when the grant was lost before the token could be read
    (`fencing_token` answers None). The token, or None unfenced."""
    waiting = False
    while True:
        while not lock.acquire():
            if not waiting:
                say(event="waiting")
                waiting = True
            time.sleep(0.05)
        if fencing_token is None:
            return None
        token = fencing_token(client, lock)
        if token is not None:
            return token


def run(fencing_token=None):
    """Serve fencelab's steps; `fencing_token(client, lock)` (the fenced twin) returns
    a token to send with each write of the current grant, or None when the grant was
    lost before it could be read."""
    hello = json.loads(sys.stdin.readline())
    etcd = urlparse(hello["servers"]["etcd"])
    client = Etcd3Client(host=etcd.hostname, port=etcd.port, timeout=10)
    # etcd leases last whole seconds: round the lease up.
    ttl = max(1, -(-hello["lease_ms"] // 1000))
    lock = client.lock(hello["key"], ttl=ttl)
    client.status()
    # etcd3gw puts its own prefix in front of the name: the key it really uses.
    say(event="ready", key=lock.key)
    token, writes = None, 0
    for line in sys.stdin:
        order = json.loads(line)
        if order["type"] == "stop":
            return
        if order["type"] != "step":
            continue
        step = order["step"]
        if step == "acquire":
            token = take(lock, client, fencing_token)
            grant = {"token": token} if token is not None else {}
            say(event="acquired", value=lock.uuid, **grant)
        elif step == "write":
            writes += 1
            sent = {"token": token} if token is not None else {}
            say(event="write", id=writes, value=order["value"], **sent)
            answer = json.loads(sys.stdin.readline())
            if not answer["accepted"]:
                print(f"write refused: {answer.get('reason')}", file=sys.stderr)
        elif step == "release":
            if lock.release():
                say(event="released")
            else:
                say(event="release_failed", reason="etcd3gw: the key no longer held this lock's uuid")
        elif step == "renew":
            left = lock.refresh()
            if left > 0:
                say(event="renewed")
            else:
                say(event="lost", reason="etcd3gw: refresh() answered -1, the lease had expired")
        elif step == "check":
            say(event="checked", owner=lock.is_acquired())
        say(event="done", step=step)


if __name__ == "__main__":
    run()
