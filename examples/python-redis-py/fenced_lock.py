"""The same worker as lock.py, fenced: right after each grant it takes a token from
`INCR` on FENCELAB_TOKEN_KEY (a key under the run's prefix) and sends it with every
write of that grant. With fencing on, the storage refuses a write whose token is lower
than one it has accepted: the paused worker's stale write is rejected.

    fencelab run gc-pause --fencing on --program "python3 examples/python-redis-py/fenced_lock.py"
"""

import os

import lock


def next_token(client):
    """A fencing token: one more than the last grant's, from Redis itself."""
    return client.incr(os.environ["FENCELAB_TOKEN_KEY"])


if __name__ == "__main__":
    lock.run(fencing_token=next_token)
