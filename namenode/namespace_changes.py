"""Namespace changes (HDFS's FSDirMkdirOp, FSDirDeleteOp, FSDirRenameOp, FSDirAttrOp,
FSDirSymlinkOp, FSDirXAttrOp): the namesystem's handlers for every change of the tree that is not
a file's bytes: mkdir, delete, rename, policies, modes, owners, times, symbolic links and
extended attributes. Each checks the request against the tree and the caller's permissions (as
HDFS does) and logs at most one record, under the writers' lock inside ``Namesystem.change``
(the retry cache, the wait until durable); apply.py applies the records.
"""

from __future__ import annotations

import logging

from hedgefs.namenode.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from hedgefs.namenode.journal import records as r
from hedgefs.namenode.namespace import paths
from hedgefs.namenode.namespace.inodes import MAX_LINK_TARGET, MAX_XATTRS, load_policy
from hedgefs.namenode.namespace.inodes import policy_name as canonical
from hedgefs.namenode.namespace.permissions import (
    EXECUTE,
    READ,
    WRITE,
    allowed,
    check,
    check_chown,
    check_mode,
    check_owner,
    check_owner_names,
    check_sticky,
    check_times,
)
from hedgefs.proto import MAX_XATTR_SIZE
from hedgefs.security.identity import Identity

log = logging.getLogger("hedgefs.namenode")

COLLECT_INLINE = 2000        # files a delete's groups are freed of at once (the rest: the monitor, in steps)
XATTR_CREATE, XATTR_REPLACE = 1, 2   # setxattr(2)'s flags
XATTR_NAMESPACE = "user."            # the one namespace kept (trusted, security, system: the mount says ENOTSUP)


class NamespaceChanges:
    def __init__(self, ns):
        self.ns = ns   # the namesystem (its lock, journal and components)
        self.tree = ns.tree

    def mkdir(self, path: str, parents: bool, who: Identity, retry, mode: int | None = None) -> None:
        """Traverse, and w on the directory a new one goes into (HDFS: the nearest existing ancestor).
        ``mode``: the new directory's (its ancestors made with ``parents`` get DIR_MODE; one there
        already keeps its own, as mkdir -p leaves it)."""
        self.ns.safemode.refuse(f"mkdir {path}")
        if mode is not None:
            check_mode(mode)
        parts = paths.components(path)
        if not parts:
            if parents:
                return
            raise AlreadyExists("directory exists: /")
        node, here = self.tree.root, paths.ROOT
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            parent_path, here = here, paths.join(here, part)
            if not allowed(who, node, EXECUTE):
                check(who, node, EXECUTE, parent_path, f"look up {path}")
            child = node.children.get(part)
            if child is None:
                if not last and not parents:
                    raise NotFound(f"no such file or directory: {paths.parent_of(path)}")
                check(who, node, WRITE, parent_path, f"create {here}")
                self.ns.log_record(r.Mkdir(path, self.ns.wall_ms(), who.name, self.tree.next_id, retry, mode))
                return
            if not child.is_dir:
                if last:
                    raise AlreadyExists(f"file exists: {here}")
                raise FailedPrecondition(f"not a directory: {here}")
            if last and not parents:
                raise AlreadyExists(f"directory exists: {here}")
            node = child

    def delete(self, path: str, recursive: bool, who: Identity, retry) -> None:
        """Permissions (HDFS): w on the parent (and the sticky rule), and rwx on every directory of
        a tree removed with it, so nobody removes what they could not remove piece by piece."""
        self.ns.safemode.refuse(f"delete {path}")
        if path == paths.ROOT:
            raise InvalidArgument("cannot delete the root directory '/'")
        chain = self.tree.walk(path, who)
        node, parent = chain[-1], chain[-2]
        check(who, parent, WRITE, paths.parent_of(path), f"delete {path}")
        check_sticky(who, parent, node, paths.parent_of(path), path, "delete")
        if node.is_dir and not recursive and node.children:
            raise FailedPrecondition(f"directory not empty: {path}")
        if node.is_dir and not who.is_admin:
            for d in self.tree.subtree_dirs(node):
                if not allowed(who, d, READ | WRITE | EXECUTE):
                    where = self.tree.path_of(d)
                    check(who, d, READ | WRITE | EXECUTE, where, f"delete {path} (it holds {where})")
        self.ns.log_record(r.Delete(path, self.ns.wall_ms(), retry))
        self.ns.collector.step(COLLECT_INLINE)
        log.debug("deleted %s for %s", path, who.name)

    def rename(self, src: str, dst: str, who: Identity, retry) -> None:
        """Permissions (HDFS): w on the source's parent (and the sticky rule), w on the target's."""
        self.ns.safemode.refuse(f"rename {src}")
        chain = self.tree.walk(src, who)
        node = chain[-1]
        if node is self.tree.root:
            raise InvalidArgument("cannot rename the root directory '/'")
        check(who, chain[-2], WRITE, paths.parent_of(src), f"move {src}")
        check_sticky(who, chain[-2], node, paths.parent_of(src), src, "move")
        self.ns.file_changes.refuse_rewritten(chain[-2], node, src, "move")
        if not paths.components(dst):
            raise AlreadyExists("directory exists: /")
        parent = self.tree.parent_dir(dst, who)[-1]
        check(who, parent, WRITE, paths.parent_of(dst), f"move {src} to {dst}")
        existing = parent.children.get(dst.rsplit("/", 1)[1])
        if existing is not None:
            raise AlreadyExists(f"{'directory' if existing.is_dir else 'file'} exists: {dst}")
        if node.is_dir and paths.is_under(dst, src):
            raise InvalidArgument(f"cannot move directory {src} into itself: {dst}")
        self.ns.log_record(r.Rename(src, dst, self.ns.wall_ms(), retry))
        log.debug("renamed %s to %s for %s", src, dst, who.name)

    def set_policy(self, path: str, policy: str, who: Identity, retry) -> None:
        """Set (or with "" clear) a directory's explicit policy. Needs w on the directory (HDFS)."""
        self.ns.safemode.refuse(f"set the policy of {path}")
        if policy:
            self.ns.manager.check_placeable(load_policy(policy))
        node = self.tree.lookup(path, who)
        if not node.is_dir:
            raise FailedPrecondition(f"not a directory: {path} (policies are set on directories)")
        check(who, node, WRITE, path, f"set the policy of {path}")
        name = canonical(policy) if policy else ""
        self.ns.log_record(r.SetPolicy(path, name, retry))
        log.info("policy of %s set to %s", path, name or "(inherited)")

    def set_permission(self, path: str, mode: int, who: Identity, retry) -> None:
        """chmod: the owner or the superuser (HDFS)."""
        self.ns.safemode.refuse(f"chmod {path}")
        check_mode(mode)
        node = self.tree.lookup(path, who)
        check_owner(who, node, path, "change the mode of")
        self.ns.log_record(r.SetPermission(path, mode, retry))
        log.info("mode of %s set to %04o by %s", path, mode, who.name)

    def set_owner(self, path: str, owner: str, group: str, who: Identity, retry) -> None:
        """chown: a new owner only by the superuser; a new group by the superuser, or by the owner
        if it is one of the owner's groups (HDFS)."""
        self.ns.safemode.refuse(f"chown {path}")
        if not owner and not group:
            raise InvalidArgument("chown needs an owner, a group, or both")
        check_owner_names(owner, group)
        check_chown(who, self.tree.lookup(path, who), owner, group, path)
        self.ns.log_record(r.SetOwner(path, owner, group, retry))
        log.info("owner of %s set to %s:%s by %s", path, owner or "(same)", group or "(same)", who.name)

    def set_times(self, path: str, mtime_ms: int, atime_ms: int, who: Identity, retry) -> None:
        """The owner, or a user who may write the inode (utimes(2); HDFS: w)."""
        self.ns.safemode.refuse(f"set the times of {path}")
        check_times(path, mtime_ms, atime_ms)
        node = self.tree.lookup(path, who)
        if who.name != node.owner and not who.is_admin:
            check(who, node, WRITE, path, f"set the times of {path}")
        if mtime_ms == -1 and atime_ms == -1:
            return
        self.ns.log_record(r.SetTimes(path, mtime_ms, atime_ms, retry))

    def symlink(self, target: str, path: str, who: Identity, retry) -> None:
        self.ns.safemode.refuse(f"symlink {path}")
        if not target or "\0" in target or len(target.encode("utf-8")) > MAX_LINK_TARGET:
            raise InvalidArgument(f"bad symbolic link target {target[:80]!r}: 1 to {MAX_LINK_TARGET} bytes, no NUL")
        parts = paths.components(path)
        if not parts:
            raise AlreadyExists("directory exists: /")
        parent = self.tree.parent_dir(path, who, parts)[-1]
        check(who, parent, WRITE, paths.parent_of(path), f"create {path}")
        existing = parent.children.get(parts[-1])
        if existing is not None:
            raise AlreadyExists(f"{'directory' if existing.is_dir else 'file'} exists: {path}")
        self.ns.log_record(r.Symlink(path, target, self.tree.next_id, self.ns.wall_ms(), who.name, parent.group, retry))

    def set_xattr(self, path: str, name: str, value: bytes, flags: int, who: Identity, retry) -> None:
        self.ns.safemode.refuse(f"set an extended attribute of {path}")
        check_xattr_name(name)
        if len(name.encode("utf-8")) + len(value) > MAX_XATTR_SIZE:
            raise InvalidArgument(f"extended attribute {name} of {path}: name and value are "
                                  f"{len(name.encode()) + len(value)} bytes, at most {MAX_XATTR_SIZE}")
        node = self.tree.lookup(path, who)
        check(who, node, WRITE, path, f"set an extended attribute of {path}")
        have = node.extra.xattrs if node.extra is not None else {}
        if flags & XATTR_CREATE and name in have:
            raise AlreadyExists(f"extended attribute {name} of {path} exists")
        if flags & XATTR_REPLACE and name not in have:
            raise NotFound(f"no extended attribute {name} on {path}")
        if name not in have and len(have) >= MAX_XATTRS:
            raise InvalidArgument(f"{path} has {len(have)} extended attributes, the most an inode may have")
        self.ns.log_record(r.SetXAttr(path, name, bytes(value), retry))

    def remove_xattr(self, path: str, name: str, who: Identity, retry) -> None:
        self.ns.safemode.refuse(f"remove an extended attribute of {path}")
        check_xattr_name(name)
        node = self.tree.lookup(path, who)
        check(who, node, WRITE, path, f"remove an extended attribute of {path}")
        if node.extra is None or name not in node.extra.xattrs:
            raise NotFound(f"no extended attribute {name} on {path}")
        self.ns.log_record(r.RemoveXAttr(path, name, retry))


def check_xattr_name(name: str) -> None:
    if not name.startswith(XATTR_NAMESPACE) or len(name) == len(XATTR_NAMESPACE):
        raise InvalidArgument(f"extended attribute {name!r}: only the user namespace is kept (user.NAME)")
