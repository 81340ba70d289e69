"""A fencelab worker whose lock is a PostgreSQL transaction-level advisory lock, taken
with psycopg, and whose write goes into the storage's table in the same transaction:

    BEGIN;
    SELECT pg_try_advisory_xact_lock(id);          -- asked every 50 ms until true
    INSERT INTO <table> (writer, token, value) ...; -- the write, under the lock
    COMMIT;                                         -- the write lands, the lock is freed

The lock's id is FENCELAB_KEY; the table is the hello's `table` (FENCELAB_TABLE). A
lease, when the scenario has one, is the session's `idle_in_transaction_session_timeout`.

fencelab drives it through the scenario's steps (docs/worker-protocol.md). It reports
`wrote` before its COMMIT, so fencelab reads who holds the lock while the transaction
still holds it, and `committed` after, so fencelab reads the table to see whether the
write landed: the program never says whether it committed. A frozen holder sits idle in its transaction; PostgreSQL ends its session
after the timeout and rolls the transaction back, which frees the lock. The next one
takes it and writes. When the frozen one wakes, its INSERT finds its session gone: its
write dies with the session, and nothing stale lands, with no token at all. The lock
and the write are one transaction.

    fencelab run examples/python-psycopg/xact.toml
"""

import json
import sys
import time

import psycopg
from psycopg import sql


def say(**event):
    """One report on stdout, flushed at once: fencelab reads it as it happens."""
    print(json.dumps(event), flush=True)


def session(hello):
    """A session of its own (psycopg opens a transaction at its first statement), ended
    by the server after the lease idle inside a transaction."""
    options = ""
    if hello["lease_ms"] > 0:
        options = f"-c idle_in_transaction_session_timeout={int(hello['lease_ms'])}"
    return psycopg.connect(
        hello["servers"]["postgres"],
        password=hello["servers"].get("password"),
        options=options,
        connect_timeout=10,
    )


def take(conn, hello, key):
    """pg_try_advisory_xact_lock in this session's transaction; on a new session when
    the server has ended this one (it held nothing then: a waiter's transaction)."""
    try:
        return conn, conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (key,)).fetchone()[0]
    except psycopg.OperationalError:
        conn = session(hello)
        return conn, conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (key,)).fetchone()[0]


def run():
    hello = json.loads(sys.stdin.readline())
    key = int(hello["key"])
    schema, table = hello["table"].split(".")
    insert = sql.SQL("INSERT INTO {} (writer, value) VALUES (%s, %s)").format(
        sql.Identifier(schema, table)
    )
    conn = session(hello)
    say(event="ready")
    writes, held = 0, False
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
                conn, got = take(conn, hello, key)
                if got:
                    break
                if not told:
                    say(event="waiting")
                    told = True
                if give_up is not None and (time.monotonic() - started) * 1000 >= give_up:
                    conn.rollback()
                    say(event="gave_up", reason=f"no lock after {give_up} ms")
                    break
                time.sleep(0.05)
            if got:
                held = True
                # Whose the lock is, as pg_locks lists it: this session's backend pid.
                say(event="acquired", value=str(conn.info.backend_pid))
        elif step == "write":
            writes += 1
            failure = None
            try:
                conn.execute(insert, (hello["worker"], order["value"]))
            except psycopg.Error as e:
                failure = f"psycopg: {e}".strip()
            # Written, not committed: fencelab reads who holds the lock, then says commit.
            say(event="wrote", id=writes, value=order["value"])
            json.loads(sys.stdin.readline())
            if failure is None:
                try:
                    conn.commit()
                except psycopg.Error as e:
                    failure = f"psycopg: {e}".strip()
            if failure is not None:
                print(f"write failed: {failure}", file=sys.stderr)
                conn = session(hello)
            # Whether it landed, fencelab reads in the table.
            say(event="committed", id=writes)
            json.loads(sys.stdin.readline())
            if held:
                held = False
                if failure is None:
                    say(event="released")  # the commit ended the transaction, and its lock
                else:
                    say(event="lost", reason=failure)
        elif step == "release":
            if held:
                held = False
                try:
                    conn.rollback()
                    say(event="released")
                except psycopg.Error as e:
                    say(event="release_failed", reason=f"psycopg: {e}".strip())
        elif step == "check":
            try:
                owner = conn.execute(
                    "SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' "
                    "AND pid = pg_backend_pid() AND granted",
                ).fetchone()[0]
            except psycopg.Error:
                owner = False
            say(event="checked", owner=owner)
        say(event="done", step=step)


if __name__ == "__main__":
    run()
