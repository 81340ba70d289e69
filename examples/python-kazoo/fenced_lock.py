"""The same worker as lock.py, fenced: right after each grant it reads its own znode's
`czxid` (the zxid that created it: ZooKeeper numbers every change of the whole ensemble,
so a later grant's is always higher; the sequence number in the znode's name counts
per lock path only) and sends it with every write of that grant. With fencing on, the
storage refuses a write whose token is lower than one it has accepted.

    fencelab run examples/python-kazoo/pause.toml --fencing on --program "python3 fenced_lock.py"
"""

import lock


def czxid(zk, held):
    """The zxid that created this grant's znode: its fencing token."""
    return zk.exists(f"{held.path}/{held.node}").czxid


if __name__ == "__main__":
    lock.run(fencing_token=czxid)
