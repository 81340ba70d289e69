"""The same worker as lock.py, fenced: right after each grant it draws a token from the
run's sequence (`nextval(token_key)`: the storage's own counter, an advisory lock hands
out none) and sends it with every write of that grant. With fencing on, the storage
refuses a write whose token is lower than one it has accepted.

    fencelab run examples/python-psycopg/timeout.toml --fencing on --program "python3 fenced_lock.py"
"""

import lock


def next_token(conn, hello):
    """One more than the last grant's, from the run's sequence."""
    return conn.execute("SELECT nextval(%s)", (hello["token_key"],)).fetchone()[0]


if __name__ == "__main__":
    lock.run(fencing_token=next_token)
