"""What a delete let go of, emptied a bounded step at a time (HDFS's delete removes blocks in
increments after the tree is unlinked under the lock).

A Delete record cuts its node out of the tree at once: one change, and no path reaches it. The
files below it still hold their block groups: ``step`` walks the cut trees (without changing
them: a checkpoint being written may still be reading one) and lets the block map forget each
file's groups (every unit is then owed a delete on its DataNode), and takes the files and
directories off the namespace's counts. The namesystem runs a step right after a delete (a small
tree goes at once), and its monitor (or a standby's tailer) the rest.
"""

from __future__ import annotations

from collections import deque

from hedgefs.namenode.blocks.blockmap import BlockMap
from hedgefs.namenode.namespace.inodes import Dir, File, Node
from hedgefs.namenode.namespace.tree import Tree


class Collector:
    def __init__(self, tree: Tree, blocks: BlockMap):
        self.tree, self.blocks = tree, blocks
        self._work: deque[Node] = deque()        # cut trees not walked yet
        self._walking: list[list[Node]] = []    # the tree being walked: its stack of children to visit

    @property
    def pending(self) -> bool:
        return bool(self._work or self._walking)

    def add(self, node: Node) -> None:
        """``node`` was cut out of the tree (its own count already taken off by the tree)."""
        if node.is_dir:
            self._work.append(node)
        else:
            self._release(node)

    def release(self, file: File, keep: "set[int] | frozenset[int]" = frozenset()) -> None:
        """A file that left the tree (replaced, abandoned): its groups go now, but those of
        ``keep`` (ids: groups the version replacing it shares, after an append or a truncate)."""
        self._release(file, keep)

    def _release(self, file: File, keep: "set[int] | frozenset[int]" = frozenset()) -> None:
        for group in file.groups:
            if group.id not in keep and self.blocks.groups.get(group.id) is group:
                self.blocks.forget(group)

    def step(self, limit: int) -> int:
        """Forget the groups of up to ``limit`` files of cut trees; returns the nodes visited."""
        done = 0
        while done < limit:
            if not self._walking:
                if not self._work:
                    break
                top = self._work.popleft()
                self._walking.append(list(top.children.values()))
                continue
            stack = self._walking[-1]
            if not stack:
                self._walking.pop()
                continue
            node = stack.pop()
            done += 1
            if node.is_dir:
                self.tree.dirs -= 1
                self._walking.append(list(node.children.values()))
            else:
                self.tree.files -= 1
                self.tree.by_policy[node.attrs.policy] -= 1
                self._release(node)
        return done

    def drain(self) -> None:
        while self.pending:
            self.step(100_000)

    def clear(self) -> None:
        self._work.clear()
        self._walking.clear()


def count(tree: Tree, node: Dir) -> tuple[int, int]:
    """(files, directories) at or below ``node`` (a directory)."""
    files = dirs = 0
    for d in tree.subtree_dirs(node):
        dirs += 1
        files += sum(1 for c in list(d.children.values()) if not c.is_dir)
    return files, dirs
