"""A fencelab worker whose lock is a PostgreSQL session advisory lock, taken with
psycopg as anyone would: `SELECT pg_try_advisory_lock(id)` on a session of its own,
asked again every 50 ms while another session holds it, `pg_advisory_unlock(id)` to
give it back. The lock's id is FENCELAB_KEY; a lease, when the scenario has one, is
the session's `idle_session_timeout`.

fencelab drives it through the scenario's steps (docs/worker-protocol.md). Without a
timeout a frozen holder keeps its session, and the lock, for as long as it sleeps: the
others wait, and give up. With one, PostgreSQL ends the frozen holder's idle session
and the lock with it; the next one takes it, and the frozen one's write, when it wakes,
lands stale: psycopg hears of the ended session only on its next statement.

    fencelab run examples/python-psycopg/pause.toml      # B waits, and gives up
    fencelab run examples/python-psycopg/timeout.toml --fencing off
"""

import json
import sys
import time

import psycopg


def say(**event):
    """One report on stdout, flushed at once: fencelab reads it as it happens."""
    print(json.dumps(event), flush=True)


def session(hello):
    """A session of its own, ended by the server after the lease without a statement."""
    conn = psycopg.connect(
        hello["servers"]["postgres"],
        password=hello["servers"].get("password"),
        autocommit=True,
        connect_timeout=10,
    )
    if hello["lease_ms"] > 0:
        conn.execute(f"SET idle_session_timeout = {int(hello['lease_ms'])}")
    return conn


def ask(conn, hello, key):
    """pg_try_advisory_lock on this session; on a new one when the server has ended
    this one for sitting idle while it held nothing (a new session loses nothing)."""
    try:
        return conn, conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]
    except psycopg.OperationalError:
        conn = session(hello)
        return conn, conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]


def run(fencing_token=None):
    """Serve fencelab's steps; `fencing_token(conn, hello)` (the fenced twin) returns a
    token to send with each write of the current grant."""
    hello = json.loads(sys.stdin.readline())
    key = int(hello["key"])
    conn = session(hello)
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
            give_up = order.get("give_up_ms")
            started, told, got = time.monotonic(), False, False
            while not got:
                conn, got = ask(conn, hello, key)
                if got:
                    break
                if not told:
                    say(event="waiting")
                    told = True
                if give_up is not None and (time.monotonic() - started) * 1000 >= give_up:
                    say(event="gave_up", reason=f"no lock after {give_up} ms")
                    break
                time.sleep(0.05)
            if got:
                token = fencing_token(conn, hello) if fencing_token else None
                grant = {"token": token} if token is not None else {}
                # Whose the lock is, as pg_locks lists it: this session's backend pid.
                say(event="acquired", value=str(conn.info.backend_pid), **grant)
        elif step == "write":
            writes += 1
            sent = {"token": token} if token is not None else {}
            say(event="write", id=writes, value=order["value"], **sent)
            answer = json.loads(sys.stdin.readline())
            if not answer["accepted"]:
                print(f"write refused: {answer.get('reason')}", file=sys.stderr)
        elif step == "release":
            try:
                freed = conn.execute("SELECT pg_advisory_unlock(%s)", (key,)).fetchone()[0]
                if freed:
                    say(event="released")
                else:
                    say(event="release_failed", reason="pg_advisory_unlock answered false")
            except psycopg.Error as e:
                say(event="release_failed", reason=f"psycopg: {e}".strip())
        elif step == "check":
            try:
                held = conn.execute(
                    "SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' "
                    "AND pid = pg_backend_pid() AND granted",
                ).fetchone()[0]
            except psycopg.Error:
                held = False
            say(event="checked", owner=held)
        say(event="done", step=step)


if __name__ == "__main__":
    run()
