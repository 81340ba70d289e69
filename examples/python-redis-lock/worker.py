"""A fencelab worker (protocol 1: docs/worker-protocol.md) whose lock is python-redis-lock's
`Lock(..., auto_renewal=True)`: a background thread extends the lease every 2/3 of it, so
the lock is held "for as long as the code runs".

What a process-wide pause does to it: SIGSTOP stops every thread, the renewal thread
too. The lease runs out on the server, the other worker takes the lock, and when this
process wakes its main thread writes on, believing it still holds the lock; the
renewal thread wakes too, finds the lock gone and dies. Renewal in the background
protects against slow work, never against a frozen process.

The library names its key `lock:<name>` (and a `lock-signal:<name>` list that waiters
block on, which expires by itself), so `ready` reports the key it really uses: fencelab's
observer reads the truth there. Its leases are whole seconds (`SET NX EX`).

driven mode: fencelab sends the scenario's steps (acquire, write, check, renew, release);
each is done with the library, then "done". free mode: lock, work for half the lease,
write this worker's name, release, exit (a free-running worker's run ends when it exits).
"""

import json
import os
import queue
import sys
import threading
import time

import redis
import redis_lock

_out = threading.Lock()


def say(**event):
    # The renewal thread reports too: one line at a time.
    with _out:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


class ReportingLock(redis_lock.Lock):
    """The library's lock, telling fencelab about each renewal its thread makes."""

    def extend(self, expire=None):
        try:
            super().extend(expire)
        except redis_lock.NotAcquired as e:
            say(event="lost", reason=str(e))
            raise
        say(event="renewed")


class Inbox:
    """fencelab's lines, read on a thread: write answers by id, everything else in order."""

    def __init__(self):
        self.messages = queue.Queue()
        self.answers = {}
        self.answered = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in sys.stdin:
            message = json.loads(line)
            if message.get("type") == "write_result":
                with self.answered:
                    self.answers[message["id"]] = message
                    self.answered.notify_all()
            else:
                self.messages.put(message)
        self.messages.put({"type": "stop"})

    def answer(self, id):
        with self.answered:
            self.answered.wait_for(lambda: id in self.answers)
            return self.answers.pop(id)


def main():
    inbox = Inbox()
    hello = inbox.messages.get()
    lease_s = max(1, round(hello["lease_ms"] / 1000))
    # Every call has a deadline longer than the blocking wait a waiter does (BLPOP for
    # up to a lease).
    # The password, when the server has one, comes only in the hello line.
    client = redis.Redis.from_url(
        hello["servers"]["redis"],
        password=hello["servers"].get("password"),
        socket_timeout=lease_s + 5,
        socket_connect_timeout=5,
    )
    client.ping()
    lock = ReportingLock(client, hello["key"], expire=lease_s, auto_renewal=True)
    writes = 0

    def acquire():
        lock.acquire(blocking=True)
        say(event="acquired", value=lock.id)

    def write(value):
        nonlocal writes
        writes += 1
        say(event="write", id=writes, value=value)
        result = inbox.answer(writes)
        if not result["accepted"]:
            say(event="error", message=f"write refused: {result.get('reason')}")

    def renew():
        try:
            lock.extend()
        except redis_lock.NotAcquired:
            pass  # reported as "lost" by the lock

    def check():
        # Asks the server whose the key is: the library's own way to tell.
        say(event="checked", owner=lock.get_owner_id() == lock.id)

    def release():
        try:
            lock.release()
            say(event="released")
        except redis_lock.NotAcquired as e:
            say(event="release_failed", reason=str(e))

    say(event="ready", key="lock:" + hello["key"])
    if hello["mode"] == "free":
        # Its logic begins when the run reaches this worker's start.
        while inbox.messages.get().get("type") != "start":
            pass
        acquire()
        time.sleep(lease_s / 2)
        write(hello["worker"])
        release()
        return
    steps = {"acquire": acquire, "check": check, "renew": renew, "release": release}
    while True:
        message = inbox.messages.get()
        if message.get("type") == "stop":
            return
        if message.get("type") != "step":
            continue
        step = message.get("step")
        try:
            if step == "write":
                write(message["value"])
            elif step in steps:
                steps[step]()
            else:
                say(event="error", message=f"unknown step {step!r}")
        except redis.RedisError as e:
            say(event="error", message=f"{step}: {e}")
        say(event="done", step=step)


if __name__ == "__main__":
    main()
    # The renewal thread is a daemon: leaving does not wait for it.
    os._exit(0)
