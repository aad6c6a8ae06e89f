"""What this mount knows of the names in its directories, so a ``tar x`` costs no lookup a file.

A directory this mount made starts with every name in it known (``Node.names``: empty when made,
then each name made or removed here). Within the attribute timeout a name it lacks is absent
without asking the NameNode (the contract: another client's new file shows within the timeout;
none existed when the knowledge began). Past the timeout a small directory is listed again, one
call instead of a stat per new name, and never more than RELIST_MAX + 1 names of it (another client
may have filled it). The directory's own status (answered to getattr within the timeout) gets the
new mtime when a name is added or removed here.
"""

import dataclasses
import time

import pyfuse3

from hedgefs.mount.calls import run
from hedgefs.mount.inodes import InodeTable, Node

RELIST_MAX = 1024  # a directory known whole is listed again (not a stat per new name) up to this many names


class DirectoryNames:
    def __init__(self, inodes: InodeTable, fs, timeout: float):
        self.inodes = inodes
        self.fs = fs
        self.timeout = timeout

    def began(self, node: Node, began: float) -> None:
        """``node`` is a directory this mount made at ``began`` (time.monotonic()): empty then."""
        if self.timeout:
            node.names, node.names_until = set(), began + self.timeout

    async def known(self, parent: Node, path: str):
        """A lookup of ``path`` in ``parent``: False for a name it lacks while its knowledge is
        within the timeout; the listing's status of the name if a relisting found it; None: ask
        the NameNode."""
        if parent.names is None or not self.timeout:
            return None
        name = path.rsplit("/", 1)[1]
        if name in parent.names:
            return None
        if time.monotonic() < parent.names_until:
            return False
        if len(parent.names) > RELIST_MAX or parent.path is None:
            parent.names = None
            return None
        began, changes = time.monotonic(), parent.changes
        try:   # (one name past the bound: another client made the directory too large to list again)
            entries = await run(lambda: list(self.fs.iter_list(parent.path, limit=RELIST_MAX + 1)))
        except pyfuse3.FUSEError:
            parent.names = None
            return None
        found = None
        if len(entries) > RELIST_MAX:
            parent.names = None   # asked about name by name from now on
        elif parent.changes == changes and parent.names is not None:   # (else: a name of ours may be missing)
            # Added to what was known, never in place of it: a file being written here is not in
            # the NameNode's listing until its commit. (A name another client removed stays: it
            # is only asked about.)
            parent.names |= {e.path.rsplit("/", 1)[1] for e in entries}
            parent.names_until = began + self.timeout
            found = False if name not in parent.names else None
        for entry in entries:
            if entry.path == path:
                return entry
        return found

    def added(self, parent_inode: int, name: bytes) -> None:
        """``name`` was made in the directory by this mount (after the NameNode said so)."""
        self._add(self._changed(parent_inode), name)

    def removed(self, parent_inode: int, name: bytes) -> None:
        """``name`` was removed from the directory by this mount."""
        node = self._changed(parent_inode)
        if node is not None and node.names is not None:
            node.names.discard(name.decode("utf-8"))

    def taken(self, parent_inode: int, name: bytes) -> None:
        """The NameNode refused to make ``name`` in the directory: it exists (another client made
        it meanwhile). The mount asks about it next time, and the kernel forgets its "no such
        entry" (the lookup before the call), so a ``mkdir -p`` or an ``ln -sf`` finds it at once."""
        self._add(self.inodes.get(parent_inode), name)
        pyfuse3.invalidate_entry_async(parent_inode, name, ignore_enoent=True)

    @staticmethod
    def _add(node: Node | None, name: bytes) -> None:
        if node is not None and node.names is not None:
            node.names.add(name.decode("utf-8"))
            node.changes += 1

    def _changed(self, parent_inode: int) -> Node | None:
        """A name was added or removed here: the directory's known status gets the new mtime.
        The kernel asks for a directory's attributes after each create in it (to check access on
        the next one): within the attribute timeout the mount answers, as for another client's
        changes, instead of one NameNode stat per file of a ``tar x``."""
        node = self.inodes.get(parent_inode)
        if node is not None and node.dir_status is not None:
            node.dir_status = dataclasses.replace(node.dir_status, mtime_ms=int(time.time() * 1000))
        return node
