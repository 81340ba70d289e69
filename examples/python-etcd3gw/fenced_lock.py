"""The same worker as lock.py, fenced: right after each grant it reads the lock key's
`create_revision` (etcd's revision counts every change to the store, so a later grant's
is always higher) and sends it with every write of that grant. With fencing on, the
storage refuses a write whose token is lower than one it has accepted.

    fencelab run examples/python-etcd3gw/pause.toml --fencing on --program "python3 fenced_lock.py"
"""

import lock


def create_revision(client, held):
    """The revision that created the lock's key, while the key is still this grant's
    (it holds our uuid): its fencing token. None when the lease ran out before it was
    read (the key gone, or another's by now): the grant is lost, and `lock.run` takes
    the lock again rather than write with a token that is not its own."""
    for value, meta in client.get(held.key, metadata=True):
        if value == held.uuid.encode("latin-1"):
            return int(meta["create_revision"])
    return None


if __name__ == "__main__":
    lock.run(fencing_token=create_revision)
