"""Checkpoint images (HDFS's fsimage): the namespace at one txid, so that a start-up loads it and
replays only the records after it.

An image is a stream of msgpack arrays, depth first from the root, cut into chunks of about
``CHUNK_BYTES``, each prefixed by its CRC32C::

    ["hedgefs-image", VERSION, txid, cluster id, generation base, first generation,
     next group id, next file id]
    ["A", n, owner, group, mode, policy, block size]       an Attrs, numbered n (before its first use)
    ["D", id, name, mtime, attrs n, policy, subdirectories, files]
                                                           a directory; then, if it has files, one
    ["F", [ids], [names], [mtimes], [attrs n], [lengths], [groups]]
                                                           its files, column by column (a file's
                                                           groups: its one group id, or a list);
                                                           then its subdirectories, depth first
    ["W", file id, directory path, name, mtime, attrs n, overwrite, holder, [[group id, [targets]]],
     kept (an append's: its base's groups it shares; None), open tail id (0: none)]
    ["R", client id, call id, op, answer, expires ms]      a retry-cache entry
    ["O", group id, generation]                            a group whose generation is not base + id
    ["G", group id, policy]                                a group in its own code, not its file's
                                                           (an open tail)
    ["L", datanode id]                                     a DataNode being decommissioned
    ["E", files, directories]                              the end, and what it held

Writing one does not stop the namespace: ``Snapshot`` is taken under the writers' lock (a few
small maps copied), and from then until it is written apply hands it whatever it is about to
change first (tree.py: a directory's children, a node's fields: copy on write), so the image
written off the lock is the tree exactly as it was at its txid.
"""

from __future__ import annotations

import gc
import io
import logging
import struct
import threading
import time
from collections import Counter
from typing import Iterable, Iterator

import crc32c
import msgpack

from hedgefs.namenode import faults
from hedgefs.namenode.blocks.blockmap import Group
from hedgefs.namenode.journal.apply import Applier
from hedgefs.namenode.namespace.inodes import Attrs, Dir, Extra, File, Lease, Link, Node, load_policy

log = logging.getLogger("hedgefs.namenode")

MAGIC = "hedgefs-image"
VERSION = 1
CHUNK_BYTES = 1 << 20
_CRC = struct.Struct("<I")


class CorruptImage(ValueError):
    """An image that does not check or does not parse."""


class Snapshot:
    """The journaled state at ``txid``, for an image written off the lock (see the module)."""

    def __init__(self, applier: Applier, txid: int):
        tree, blocks = applier.tree, applier.blocks
        self.txid = txid
        self.root = tree.root
        self._children: dict[Dir, dict[str, Node]] = {}
        self._fields: dict[Node, tuple] = {}
        self.header = [MAGIC, VERSION, txid, applier.cluster_id, blocks.generation_base, blocks.generation_first,
                       blocks.next_group_id, tree.next_id]
        self.writing = []
        for file_id, lease in tree.writing.items():
            f = lease.file
            self.writing.append((file_id, tree.path_of(lease.parent), f.name, f.mtime, f.attrs, lease.overwrite,
                                 lease.holder, [[g.id, [blocks.units(g).get(i, "") for i in
                                                        range(load_policy(blocks.policy_of(g)).units)]]
                                                for g in f.groups[lease.kept:]],
                                 lease.kept if lease.base is not None else None, lease.tail))
        self.codes = dict(blocks.codes)
        self.left_out = dict(blocks.left_out)
        self.retry = applier.retry_cache.copy()
        self.odd = dict(blocks.odd_generations)
        self.leaving = sorted(applier.leaving)

    # copy on write (tree.py calls these while the snapshot is being written)

    def keep_children(self, d: Dir) -> None:
        if d not in self._children:
            self._children[d] = dict(d.children)

    def keep_node(self, node: Node) -> None:
        if node not in self._fields:
            self._fields[node] = _fields(node)

    def _as_of(self, node: Node) -> tuple:
        now = _fields(node)   # first the live fields, then the kept ones win: see tree.py
        return self._fields.get(node, now)

    def _children_of(self, d: Dir) -> list[Node]:
        now = list(d.children.values())
        kept = self._children.get(d)
        return now if kept is None else list(kept.values())

    def chunks(self) -> Iterator[bytes]:
        """The image, in CRC32C-prefixed chunks."""
        out = _Chunker()
        pack = msgpack.Packer(use_bin_type=True).pack
        numbers: dict[Attrs, int] = {}

        def attrs(a: Attrs) -> int:
            n = numbers.get(a)
            if n is None:
                n = numbers[a] = len(numbers)
                out.write(pack(["A", n, a.owner, a.group, a.mode, a.policy, a.block_size]))
            return n

        out.write(pack(self.header))
        files = dirs = 0
        stack: list[Iterator[Node]] = [iter([self.root])]
        while stack:
            node = next(stack[-1], None)
            if node is None:
                stack.pop()
                continue
            name, a, mtime, policy, extra = self._as_of(node)
            subdirs, columns = [], ([], [], [], [], [], [])
            ids, names, mtimes, numbers_, lengths, groups_ = columns
            links, extras = ([], [], [], [], []), []
            if extra is not None:
                extras.append((None, extra))
            for child in self._children_of(node):
                if child.is_dir:
                    subdirs.append(child)
                    continue
                c_name, c_attrs, c_mtime, c_length, c_groups, _writer, c_extra = self._as_of(child)
                if c_extra is not None:
                    extras.append((c_name, c_extra))
                if child.is_link:
                    for column, value in zip(links, (child.id, c_name, c_mtime, attrs(c_attrs), child.target)):
                        column.append(value)
                    continue
                ids.append(child.id)
                names.append(c_name)
                mtimes.append(c_mtime)
                numbers_.append(attrs(c_attrs))
                lengths.append(c_length)
                groups_.append(c_groups[0].id if len(c_groups) == 1 else [g.id for g in c_groups])
            out.write(pack(["D", node.id, name, mtime, attrs(a), policy, len(subdirs), len(ids)]))
            if ids:
                out.write(pack(["F", *columns]))
            if links[0]:   # (after the directory's files: the loader puts them in the last directory read)
                out.write(pack(["S", *links]))
            for x_name, x in extras:
                out.write(pack(["X", x_name, x.atime, x.xattrs]))
            files += len(ids) + len(links[0])
            dirs += 1
            stack.append(iter(subdirs))
            yield from out.full()
        for file_id, parent, name, mtime, a, overwrite, holder, groups, kept, tail in self.writing:
            n = attrs(a)
            out.write(pack(["W", file_id, parent, name, mtime, n, overwrite, holder, groups, kept, tail]))
        for (client, call), (op, answer, expires) in self.retry.items():
            out.write(pack(["R", client, call, op, answer, expires]))
        for gid, generation in self.odd.items():
            out.write(pack(["O", gid, generation]))
        for gid, policy in self.codes.items():
            out.write(pack(["G", gid, policy]))
        for gid, copies in self.left_out.items():
            out.write(pack(["T", gid, sorted(copies)]))
        for datanode_id in self.leaving:
            out.write(pack(["L", datanode_id]))
        out.write(pack(["E", files, dirs]))
        yield from out.full()
        yield from out.rest()


def _fields(node: Node) -> tuple:
    if node.is_dir:
        return node.name, node.attrs, node.mtime, node.policy, node.extra
    return node.name, node.attrs, node.mtime, node.length, node.groups, node.writer, node.extra


class _Chunker:
    def __init__(self):
        self._buf = io.BytesIO()

    def write(self, data: bytes) -> None:
        self._buf.write(data)

    def full(self) -> Iterator[bytes]:
        if self._buf.tell() >= CHUNK_BYTES:
            yield from self.rest()

    def rest(self) -> Iterator[bytes]:
        data = self._buf.getvalue()
        self._buf = io.BytesIO()
        if data:
            yield _CRC.pack(crc32c.crc32c(data)) + data


def _items(chunks: Iterable[bytes]) -> Iterator[list]:
    unpacker = msgpack.Unpacker(raw=False, use_list=False, max_buffer_size=1 << 31)
    for n, chunk in enumerate(chunks):
        if len(chunk) < 4 or _CRC.unpack_from(chunk)[0] != crc32c.crc32c(memoryview(chunk)[4:]):
            raise CorruptImage(f"chunk {n}: CRC32C mismatch")
        unpacker.feed(memoryview(chunk)[4:])
        yield from unpacker


def load(applier: Applier, chunks: Iterable[bytes]) -> None:
    """Rebuild the journaled state from an image (into an empty namespace). The objects it makes
    live as long as the process: they are moved out of the garbage collector's sight after
    (``gc.freeze``), and it is paused meanwhile (a collection per 700 new objects, each walking
    what is already loaded, would make a load of millions quadratic)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        _load(applier, chunks)
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def _load(applier: Applier, chunks: Iterable[bytes]) -> None:
    tree, blocks = applier.tree, applier.blocks
    items = _items(chunks)
    try:
        header = next(items)
        if header[0] != MAGIC or header[1] != VERSION:
            raise CorruptImage(f"not a hedgefs image of version {VERSION}: {header[:2]}")
        (_m, _v, _txid, applier.cluster_id, blocks.generation_base, blocks.generation_first,
         blocks.next_group_id, tree.next_id) = header
        slots = blocks.groups.reserve(blocks.next_group_id)
        table: list[Attrs] = []
        stack: list[list] = []     # [directory, subdirectories still to read]
        files = dirs = complete_groups = 0
        by_policy: Counter[str] = Counter()
        empty = b""
        item = next(items)
        while True:
            kind = item[0]
            if kind == "D":
                _k, node_id, name, mtime, n, policy, subdirs, nfiles = item
                if dirs == 0:
                    d = tree.root
                    d.attrs, d.mtime, d.policy = table[n], mtime, policy
                else:
                    parent = stack[-1][0]
                    d = Dir(node_id, name, parent, table[n], mtime, policy)
                    parent.children[name] = d
                    _consumed(stack)
                dirs += 1
                if nfiles:
                    _k, ids, names, mtimes, numbers, lengths, gids = next(items)
                    if _k != "F" or len(ids) != nfiles:
                        raise CorruptImage(f"directory {name!r}: its files are not where they should be")
                    children = d.children
                    for node_id, fname, fmtime, n, length, g in zip(ids, names, mtimes, numbers, lengths, gids):
                        f = File(node_id, fname, d, table[n], fmtime, length)
                        if g.__class__ is int:
                            group = slots[g] = Group(g, f, empty)
                            f.groups = (group,)
                            complete_groups += 1
                        else:
                            gs = []
                            for gid in g:
                                group = slots[gid] = Group(gid, f, empty)
                                gs.append(group)
                            f.groups = tuple(gs)
                            complete_groups += len(gs)
                        children[fname] = f
                        by_policy[f.attrs.policy] += 1
                    files += nfiles
                if subdirs:
                    stack.append([d, subdirs])
            elif kind == "A":
                _k, n, owner, group, mode, policy, block_size = item
                if n != len(table):
                    raise CorruptImage(f"attributes {n} out of order")
                table.append(Attrs.of(owner, group, mode, policy, block_size))
            elif kind == "S":   # the symbolic links of the last directory read
                _k, ids, names, mtimes, numbers, targets = item
                for node_id, lname, lmtime, n, target in zip(ids, names, mtimes, numbers, targets):
                    d.children[lname] = Link(node_id, lname, d, table[n], lmtime, target)
                    by_policy[""] += 1
                files += len(ids)
            elif kind == "X":   # atime and xattrs of the last directory read (None) or of a child of it
                _k, x_name, atime, xattrs = item
                (d if x_name is None else d.children[x_name]).extra = Extra(atime, dict(xattrs))
            elif kind == "W":
                _k, file_id, parent_path, name, mtime, n, overwrite, holder, wgroups, *rest = item
                kept = rest[0] if rest else None   # an append's or a truncate's: the first groups of its base
                parent = tree.find(parent_path)
                base = parent.children.get(name) if kept is not None else None
                kept = kept or 0
                f = File(file_id, name, parent, table[n], mtime)
                f.writer = Lease(file_id, f, parent, overwrite, holder, applier.clock(), base, kept)
                f.groups = (base.groups[:kept] if kept else ()) + \
                    tuple(blocks.add_group(f, gid, targets) for gid, targets in wgroups)
                f.writer.tail = tail = rest[1] if len(rest) > 1 else 0
                if tail and tail not in {gid for gid, _targets in wgroups}:   # the base's last group now
                    blocks.open_tails.add(tail)
                tree.add_lease(f.writer)
            elif kind == "R":
                _k, client, call, op, answer, expires = item
                applier.retry_cache.restore((client, call), op, _frozen(answer), expires)
            elif kind == "O":
                blocks.odd_generations[item[1]] = item[2]
            elif kind == "G":
                blocks.codes[item[1]] = item[2]
            elif kind == "T":   # copies left out of a group (BlockMap.left_out)
                blocks.left_out[item[1]] = frozenset((index, datanode_id) for index, datanode_id in item[2])
            elif kind == "L":
                applier.leaving.add(item[1])
            elif kind == "E":
                if (item[1], item[2]) != (files, dirs):
                    raise CorruptImage(f"it ends with {item[1]} files and {item[2]} directories, "
                                       f"but held {files} and {dirs}")
                break
            else:
                raise CorruptImage(f"an entry of unknown kind {kind!r}")
            item = next(items)
    except CorruptImage:
        raise
    except StopIteration:
        raise CorruptImage("it ends before its end mark") from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as err:
        raise CorruptImage(f"unreadable: {type(err).__name__}: {err}") from None
    blocks.groups.recount()
    tree.files, tree.dirs, tree.by_policy = files, dirs, by_policy
    blocks.complete_groups = complete_groups


def _frozen(value):
    """msgpack's arrays as the tuples apply made."""
    return tuple(_frozen(v) for v in value) if isinstance(value, (list, tuple)) else value


def _consumed(stack: list[list]) -> None:
    top = stack[-1]
    top[1] -= 1
    while stack and stack[-1][1] == 0:
        stack.pop()


class Checkpointer:
    """Writes an image every ``every`` records (a thread of the active), and at clean shutdown;
    in a namespace of more than 8 x ``every`` inodes, every eighth of its size instead: an image
    costs in proportion to the namespace (seconds at 10 M inodes, off the lock but on the same
    GIL), the records it saves a start-up in proportion to their number, so that neither the
    images nor a start-up's replay grow out of proportion (10 M inodes: 1.25 M records, a few
    seconds of replay)."""

    def __init__(self, journal, lock, every: int = 200_000):
        self.journal, self.lock, self.every = journal, lock, every
        self.images = 0
        self._due = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._busy = threading.Lock()

    def start(self) -> None:
        self.journal.on_batch = self._batch
        self._thread = threading.Thread(target=self._run, name="namenode-checkpoint", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop = True
        self._due.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=600)

    def _period(self) -> int:
        tree = self.journal.applier.tree
        return max(self.every, (tree.files + tree.dirs) // 8)

    def _batch(self, last: int) -> None:
        """The journal, after each batch: is an image due?"""
        if last - self.journal.image_txid >= self._period():
            self._due.set()

    def _run(self) -> None:
        while True:
            self._due.wait()
            self._due.clear()
            if self._stop:
                return
            if self.journal.last - self.journal.image_txid >= self._period() and not self.journal.failed:
                try:
                    self.checkpoint()
                except Exception:
                    log.exception("checkpoint failed; the journal goes on, the next one tries again")

    def checkpoint(self) -> int:
        """An image of the namespace at the last txid logged, made durable first; then the
        journal up to it is truncated. Returns the txid."""
        journal = self.journal
        tree = journal.applier.tree
        with self._busy:
            with self.lock:
                txid = journal.last
                if txid == journal.image_txid:
                    return txid
                snapshot = Snapshot(journal.applier, txid)
                tree.snapshot = snapshot
            began = time.monotonic()
            try:
                journal.wait_durable(txid)
                journal.engine.write_image(txid, snapshot.chunks())
                faults.crash_point("checkpoint:written")
            finally:
                with self.lock:
                    tree.snapshot = None
            journal.engine.publish_image(txid)
            journal.image_txid = txid
            faults.crash_point("checkpoint:published")
            journal.engine.truncate(txid)
            faults.crash_point("checkpoint:truncated")
            self.images += 1
            log.info("checkpoint: image at txid %d (%d files, %d directories) in %.1f s", txid, tree.files,
                     tree.dirs, time.monotonic() - began)
            return txid


def image_bytes(applier: Applier, txid: int) -> list[bytes]:
    """The image as chunks, at once (tests, the upgrade)."""
    return list(Snapshot(applier, txid).chunks())

