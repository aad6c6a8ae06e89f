"""Helpers for tests that drive ``Namesystem`` directly: a hand-driven clock, quick writes.

``FakeClock`` is the one fake clock of the tests: the breaker, latency-model and DataNode
metrics tests use it too. Not used by the NameNode itself.
"""

from __future__ import annotations

import random

import pytest

from hedgefs.ec.layout import zero_units
from hedgefs.namenode.blocks.blockmap import GroupCommit
from hedgefs.namenode.namesystem import Namesystem
from hedgefs.namenode.namespace.inodes import load_policy


class FakeClock:
    """Seconds; serves as both the monotonic and the wall clock. Moves only when told."""

    def __init__(self, start: float = 1_700_000_000.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_namenode(data_dir, clock: FakeClock, *, policy: str = "RS-3-2-1k", block_size: int = 4096,
                  dead_interval_s: float = 30.0, lease_timeout_s: float = 600.0, seed: int = 1,
                  receipt_wait_s: float = 0.05, **kwargs) -> Namesystem:
    """``receipt_wait_s`` is real time (Complete waits on a condition): short, so that a test
    completing without receipts fails at once."""
    return Namesystem(str(data_dir), default_policy=policy, default_block_size=block_size,
                    dead_interval_s=dead_interval_s, lease_timeout_s=lease_timeout_s,
                    receipt_wait_s=receipt_wait_s, clock=clock, wall_clock=clock, rng=random.Random(seed), **kwargs)


# A file whose one group has every unit of the tests' default policy (RS-3-2-1k): one byte more
# than k - 1 cells. A smaller one leaves zero units (ec/layout.py), which nothing stores or expects.
WHOLE = 2 * 1024 + 1


def stored(nn: Namesystem, group, length: int, indexes=None) -> GroupCommit:
    """A GroupCommit for ``group`` (an AddBlockGroup answer), after each unit in ``indexes``
    (default: all) has been reported stored by its DataNode, as a real DataNode would."""
    indexes = tuple(u.index for u in group.units) if indexes is None else tuple(indexes)
    for u in group.units:
        if u.index in indexes:
            nn.unit_stored(u.datanode_id, group.id, u.index, group.generation)
    return GroupCommit(group.id, length, indexes)


def generation(nn: Namesystem, group_id: int) -> int:
    """The generation the NameNode issued with a group (its units carry it)."""
    return nn.blocks.generation(group_id)


def add_datanodes(nn: Namesystem, count: int, start: int = 1) -> list[str]:
    ids = [f"dn{i}" for i in range(start, start + count)]
    for i, dn in zip(range(start, start + count), ids):
        nn.register(dn, f"127.0.0.1:{40000 + i}")
    return ids


def heartbeat_all(nn: Namesystem, ids=None):
    """Heartbeat every (or the given) DataNode; returns {id: commands}."""
    ids = ids if ids is not None else [n.id for n in nn.liveness.all()]
    return {dn: nn.heartbeat(dn, "").commands for dn in ids}


def write_file(nn: Namesystem, path: str, length: int, *, overwrite: bool = False, policy: str = "",
               lost: dict[int, set[int]] | None = None) -> int:
    """Create, add groups, complete, as a client would (a short group's zero units are not
    stored: ec/layout.py); ``lost`` = {group seq: unit indexes not stored}.

    Returns the file id.
    """
    created = nn.create(path, overwrite=overwrite, policy=policy)
    pol = load_policy(created.policy)
    full = pol.k * created.block_size
    commits, left, seq = [], length, 0
    while left > 0:
        group = nn.add_block_group(created.file_id)
        glen = min(full, left)
        skip = (lost or {}).get(seq, set()) | zero_units(pol, glen)
        commits.append(stored(nn, group, glen, [i for i in range(pol.units) if i not in skip]))
        left -= glen
        seq += 1
    nn.complete(created.file_id, length, commits)
    return created.file_id


def held(nn: Namesystem, datanode_id: str) -> list[tuple[int, int, int]]:
    """The (group id, index, generation) the map puts on ``datanode_id``: its block report, as a
    DataNode that lost nothing would send it."""
    return [(g, i, nn.blocks.generation(g)) for g, i, _group in nn.blocks.units_on(datanode_id, 1 << 62)]


def listed_while_deleting(nn: Namesystem) -> list[tuple[str, int, int]]:
    """(DataNode, group id, index) of copies the map lists although a delete of that very copy is
    owed: none may be (a copy on its way out is no replica a read may be sent to)."""
    out = []
    for datanode_id, _count in nn.blocks.pending_delete_counts().items():
        for group_id, index, _gen in nn.blocks.pending_deletes(datanode_id):
            group = nn.blocks.get(group_id)
            if group is not None and nn.blocks.holder(group, index) == datanode_id:
                out.append((datanode_id, group_id, index))
    return out


@pytest.fixture
def nn(tmp_path, clock):
    """A NameNode (``make_namenode``) with five DataNodes registered."""
    namenode = make_namenode(tmp_path / "nn", clock)
    add_datanodes(namenode, 5)
    yield namenode
    namenode.close()


def state(nn: Namesystem) -> dict:
    """Everything the journal rebuilds, field by field: every directory and file (attributes,
    times, policies, lengths, groups and their generations), every write in progress (its
    targets), the id counters, the retry cache's answers, the DataNodes being decommissioned."""
    tree, blocks = nn.tree, nn.blocks
    nodes = {}
    stack = [("/", tree.root)]
    while stack:
        path, node = stack.pop()
        a = node.attrs
        extra = (node.extra.atime, dict(node.extra.xattrs)) if node.extra is not None else None
        if node.is_dir:
            nodes[path] = ("dir", node.id, a.owner, a.group, a.mode, node.mtime, node.policy, extra)
            for name, child in node.children.items():
                stack.append((path.rstrip("/") + "/" + name, child))
        elif node.is_link:
            nodes[path] = ("link", node.id, a.owner, a.group, a.mode, node.mtime, node.length, node.target, extra)
        else:
            nodes[path] = ("file", node.id, a.owner, a.group, a.mode, a.policy, a.block_size, node.mtime, node.length,
                           [(g.id, blocks.generation(g.id)) for g in node.groups], extra)
            assert all(g.file is node for g in node.groups), f"{path}: a group that is not its own"
    writing = {fid: (tree.lease_path(lease), lease.overwrite, lease.holder, lease.file.attrs.owner,
                     lease.file.attrs.mode, lease.kept, lease.base is not None and lease.base.id, lease.tail,
                     [(g.id, blocks.generation(g.id), sorted(blocks.units(g).items()) if i >= lease.kept else None)
                      for i, g in enumerate(lease.file.groups)])
               for fid, lease in tree.writing.items()}
    retry = {key: (op, answer) for key, (op, answer, _expires) in nn.retry.items()}
    return {"nodes": nodes, "writing": writing, "next_id": tree.next_id,
            "next_group_id": blocks.next_group_id, "generation_base": blocks.generation_base,
            "generation_first": blocks.generation_first, "retry": retry, "leaving": set(nn.leaving),
            "cluster_id": nn.cluster_id, "files": tree.files, "dirs": tree.dirs,
            "by_policy": {p: n for p, n in tree.by_policy.items() if n},
            "complete_groups": blocks.complete_groups, "codes": dict(blocks.codes),
            "open_tails": set(blocks.open_tails)}
