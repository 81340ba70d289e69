"""The same worker as lock.py, fenced: right after each grant it reads the lock key's
`create_revision` (etcd's revision counts every change to the store, so a later grant's
is always higher) and sends it with every write of that grant. With fencing on, the
storage refuses a write whose token is lower than one it has accepted.

    fencelab run examples/python-etcd3gw/pause.toml --fencing on --program "python3 fenced_lock.py"
"""

import lock


def create_revision(client, held):
    """The revision that created the lock's key: this grant's fencing token."""
    ((_, meta),) = client.get(held.key, metadata=True)
    return int(meta["create_revision"])


if __name__ == "__main__":
    lock.run(fencing_token=create_revision)
