"""The schema-5 format (the NameNode's SQLite tables, and their rows as etcd keys, before the
journal) converted to a checkpoint image at txid 1: the journal goes on from there.

Everything a user or a writer can see carries over: directories and files with their owners,
groups, modes, times, policies (set on directories, written with files), block sizes, lengths,
block groups (ids, generations, order), files being written with their writers' targets, the
retry cache's answers still good, the DataNodes being decommissioned. What carries over nothing:
unit locations, receipts, corrupt marks and pending deletes (memory only now: DataNodes report
them again, and a unit of a group the namespace no longer has is deleted when reported), the
registry of DataNodes (they register again), trees a recursive delete had cut loose and not yet
purged (gone: their units are deleted as they are reported), and empty block groups (no bytes).
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict

from hedgefs.ec.layout import group_data_size
from hedgefs.namenode.blocks.blockmap import BlockMap
from hedgefs.namenode.blocks.collector import Collector
from hedgefs.namenode.journal import records as r
from hedgefs.namenode.journal.apply import Applier
from hedgefs.namenode.journal.image import image_bytes
from hedgefs.namenode.namespace.inodes import Attrs, Dir, File, Lease, load_policy
from hedgefs.namenode.namespace.retry_cache import RetryCache
from hedgefs.namenode.namespace.tree import Tree

SCHEMA_VERSION = 5
ROOT_ID = 1
DECOMMISSION_KEY = "decommission/"
_METHODS = {"Mkdir": r.Mkdir, "Delete": r.Delete, "Rename": r.Rename, "SetPolicy": r.SetPolicy,
            "SetPermission": r.SetPermission, "SetOwner": r.SetOwner, "Create": r.Create,
            "AddBlockGroup": r.AddGroup, "Complete": r.Complete, "Concat": r.Concat, "Abandon": r.Abandon}


class CannotUpgrade(RuntimeError):
    """A schema-5 namespace this NameNode cannot convert (one line)."""


def from_sqlite(conn: sqlite3.Connection, superuser: str = "hedgefs") -> list[bytes]:
    """The image (chunks) of a schema-5 SQLite file's namespace."""
    conn.row_factory = sqlite3.Row
    try:
        rows = {t: [dict(x) for x in conn.execute(f"SELECT * FROM {t}")]
                for t in ("meta", "inodes", "groups", "units", "retry_cache")}
        rows["sqlite_sequence"] = [dict(x) for x in conn.execute("SELECT * FROM sqlite_sequence")]
    finally:
        conn.row_factory = None
    return from_rows(rows, superuser)


def from_rows(rows: dict[str, list[dict]], superuser: str = "hedgefs") -> list[bytes]:
    """The image (chunks) of schema-5 rows (table -> row dicts: a SQLite file's, an etcd prefix's)."""
    return image_bytes(build(rows, superuser), 1)


def build(rows: dict[str, list[dict]], superuser: str = "hedgefs", now_ms: int | None = None) -> Applier:
    """The journaled state of schema-5 rows (table -> row dicts)."""
    import time

    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    meta = {m["key"]: m["value"] for m in rows.get("meta", [])}
    version = str(meta.get("schema_version", ""))
    if version != str(SCHEMA_VERSION):
        raise CannotUpgrade(f"a namespace of schema version {version or '(none)'}; only version {SCHEMA_VERSION} "
                            f"converts")
    tree = Tree("RS-6-3-1024k", superuser)
    blocks = BlockMap(lambda: now_ms)
    applier = Applier(tree, blocks, RetryCache(), Collector(tree, blocks), wall_ms=lambda: now_ms)
    applier.cluster_id = meta["cluster_id"]
    inodes = {i["id"]: i for i in rows.get("inodes", [])}
    children: dict[int, list[dict]] = defaultdict(list)
    for i in inodes.values():
        if i["parent"] is not None:
            children[i["parent"]].append(i)
    groups_of: dict[int, list[dict]] = defaultdict(list)
    for g in rows.get("groups", []):
        groups_of[g["file_id"]].append(g)
    units_of: dict[int, dict[int, str]] = defaultdict(dict)
    for u in rows.get("units", []):
        units_of[u["group_id"]][u["idx"]] = u["datanode_id"]
    sequence = {s["name"]: s["seq"] for s in rows.get("sqlite_sequence", [])}
    next_gid = max([sequence.get("groups", 0), *(g["id"] for g in rows.get("groups", []))], default=0) + 1
    first, nxt = int(meta["generation_first"]), int(meta["generation_next"])
    blocks.generation_first = first
    blocks.generation_base = nxt - next_gid
    blocks.next_group_id = next_gid
    tree.next_id = max([sequence.get("inodes", 0), *inodes], default=1) + 1

    def attrs(i: dict, file: bool) -> Attrs:
        if file:
            return Attrs.of(i["owner"], i["grp"], i["mode"], i["policy"], i["block_size"])
        return Attrs.of(i["owner"], i["grp"], i["mode"])

    def generation(g: dict) -> None:
        if g["generation"] != blocks.generation_base + g["id"]:
            blocks.odd_generations[g["id"]] = g["generation"]

    root = inodes.get(ROOT_ID)
    if root is None:
        raise CannotUpgrade("a namespace without its root directory")
    tree.root.attrs, tree.root.mtime, tree.root.policy = attrs(root, False), root["mtime_ms"], root["policy"] or ""
    complete = 0
    stack = [(tree.root, ROOT_ID)]
    while stack:
        directory, dir_id = stack.pop()
        for i in sorted(children.get(dir_id, ()), key=lambda x: x["name"]):
            if i["state"] != "complete":
                continue
            if i["is_dir"]:
                d = Dir(i["id"], i["name"], directory, attrs(i, False), i["mtime_ms"], i["policy"] or "")
                directory.children[d.name] = d
                tree.dirs += 1
                stack.append((d, i["id"]))
                continue
            f = File(i["id"], i["name"], directory, attrs(i, True), i["mtime_ms"], i["length"])
            kept = [g for g in sorted(groups_of.get(i["id"], ()), key=lambda g: g["seq"]) if g["length"] > 0]
            _check_lengths(tree.path_of(directory), f, kept)
            gs = []
            for g in kept:
                generation(g)
                gs.append(blocks.add_group(f, g["id"], ()))
            f.groups = tuple(gs)
            complete += len(gs)
            directory.children[f.name] = f
            tree.files += 1
            tree.by_policy[f.attrs.policy] += 1
    blocks.complete_groups = complete
    for i in inodes.values():   # files being written, in directories still there
        if i["state"] != "writing" or i["parent"] is None:
            continue
        parent = _dir_of(tree, inodes, i["parent"])
        if parent is None:
            continue
        f = File(i["id"], i["name"], parent, attrs(i, True), i["mtime_ms"])
        f.writer = Lease(i["id"], f, parent, bool(i["overwrite"]), i["owner"], 0.0)
        width = load_policy(i["policy"]).units
        gs = []
        for g in sorted(groups_of.get(i["id"], ()), key=lambda g: g["seq"]):
            generation(g)
            units = units_of.get(g["id"], {})
            gs.append(blocks.add_group(f, g["id"], [units.get(j, "") for j in range(width)]))
        f.groups = tuple(gs)
        tree.add_lease(f.writer)
    for key in meta:
        if key.startswith(DECOMMISSION_KEY):
            applier.leaving.add(key[len(DECOMMISSION_KEY):])
    for row in rows.get("retry_cache", []):
        if row["expires_ms"] > now_ms and row["method"] in _METHODS:
            applier.retry_cache.restore((row["client_id"], row["call_id"]), r.CODES[_METHODS[row["method"]]],
                                        _answer(json.loads(row["result"])), row["expires_ms"])
    return applier


def _check_lengths(where: str, f: File, groups: list[dict]) -> None:
    full = group_data_size(load_policy(f.attrs.policy), f.attrs.block_size)
    lengths = [g["length"] for g in groups]
    if sum(lengths) != f.length or any(n != full for n in lengths[:-1]) or (lengths and lengths[-1] > full):
        raise CannotUpgrade(f"file {where.rstrip('/')}/{f.name}: its groups hold {lengths} bytes, not every "
                            f"one but the last {full} and {f.length} in all")


def _dir_of(tree: Tree, inodes: dict[int, dict], inode_id: int) -> Dir | None:
    names = []
    while inode_id != ROOT_ID:
        i = inodes.get(inode_id)
        if i is None or i["parent"] is None or not i["is_dir"]:
            return None
        names.append(i["name"])
        inode_id = i["parent"]
    node = tree.find("/" + "/".join(reversed(names)))
    return node if node is not None and node.is_dir else None


def _answer(value: dict):
    kind = value.get("type")
    if kind == "created":
        return (value["file_id"], value["policy"], value["block_size"])
    if kind == "group":
        units = sorted(value["units"], key=lambda u: u["index"])
        return (value["id"], tuple(u["datanode_id"] for u in units))
    return None
