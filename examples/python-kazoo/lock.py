"""A fencelab worker whose lock is kazoo's `Lock` (ZooKeeper's lock recipe), as a user
of kazoo would write it: a session whose timeout is the lease, `zk.Lock(path,
identifier)`, `acquire()` (an ephemeral sequential znode under the path; the lowest
holds the lock, the others watch the one before theirs), a write, `release()`.

fencelab drives it through the scenario's steps (docs/worker-protocol.md). Under the
article's pause the session's heartbeats stop, ZooKeeper expires the session and its
znode, the next in line holds the lock. After the wake kazoo's listener hears the
session SUSPENDED, then LOST (reported as `lost`), but `lock.is_acquired` stays true,
and the write is already on its way.

    fencelab run examples/python-kazoo/pause.toml --fencing off
"""

import json
import os
import sys
import threading

from kazoo.client import KazooClient, KazooState


def say(**event):
    """One report on stdout, flushed at once (a whole line per write: the listener's
    thread reports too)."""
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def run(fencing_token=None):
    """Serve fencelab's steps; `fencing_token(zk, lock)` (the fenced twin) returns a
    token to send with each write of the current grant."""
    hello = json.loads(sys.stdin.readline())
    # The session's timeout is the lease: heartbeats that stop for longer end it.
    zk = KazooClient(hosts=hello["servers"]["zookeeper"], timeout=hello["lease_ms"] / 1000)
    lost, stopping = threading.Event(), threading.Event()

    def heard(state):
        # kazoo calls its own stop a LOST session too: that is no lost lock.
        if state == KazooState.LOST and not lost.is_set() and not stopping.is_set():
            lost.set()
            say(event="lost", reason="kazoo's listener heard the session LOST")

    zk.add_listener(heard)
    zk.start(timeout=10)
    identifier = f"{hello['worker']}-{os.getpid()}"
    lock = zk.Lock(hello["key"], identifier=identifier)
    say(event="ready")
    token, writes = None, 0
    for line in sys.stdin:
        order = json.loads(line)
        if order["type"] == "stop":
            break
        if order["type"] != "step":
            continue
        step = order["step"]
        if step == "acquire":
            lock.acquire()
            lost.clear()
            token = fencing_token(zk, lock) if fencing_token else None
            grant = {"token": token} if token is not None else {}
            say(event="acquired", value=identifier, **grant)
        elif step == "write":
            writes += 1
            sent = {"token": token} if token is not None else {}
            say(event="write", id=writes, value=order["value"], **sent)
            answer = json.loads(sys.stdin.readline())
            if not answer["accepted"]:
                print(f"write refused: {answer.get('reason')}", file=sys.stderr)
        elif step == "release":
            # kazoo answers True even when the znode had already gone with the session.
            lock.release()
            say(event="released")
        elif step == "renew":
            if lost.is_set():
                say(event="lost", reason="kazoo: the session was LOST, and its znode with it")
            else:
                say(event="renewed")
        elif step == "check":
            say(event="checked", owner=lock.is_acquired)
        say(event="done", step=step)
    stopping.set()
    zk.stop()


if __name__ == "__main__":
    run()
