"""The FUSE operations: each kernel request as calls of one long-lived FileSystem.

Requests arrive on trio tasks (pyfuse3); every call that reaches the cluster runs in a worker
thread (calls.run) or is a client future awaited on trio (calls.wait, reads), so a slow NameNode or DataNode holds up its own request only, and many reads
are in flight at once. What each operation means, and what is refused with which errno, is the
docs/mount.md's table of operations; the comments here say why where it is not obvious.

Caching: entries and attributes are valid for ``timeout`` seconds (0 for a file being written
here: its size grows). An open keeps the kernel's page cache of a file (``keep_cache``) only when
the NameNode gives the version (length, mtime, block groups) the kernel last read; otherwise the
kernel drops it. A change seen by getattr drops it too (libfuse's auto_inval_data).
"""

import concurrent.futures
import dataclasses
import errno
import inspect
import logging
import os
import time

import pyfuse3
import trio

from hedgefs.client.errors import AlreadyExists, FileChanged, HedgefsError, NotAllowed
from hedgefs.client.fs import FileStatus, FileSystem
from hedgefs.mount.attrs import Owners, attributes
from hedgefs.mount.calls import as_fuse_error, fail, guarded, run, wait
from hedgefs.mount.files import Edit, Listing, ReadHandle, WriteFailed, WriteHandle, Writing, version
from hedgefs.mount.inodes import InodeTable, Node, child
from hedgefs.mount.names import DirectoryNames

log = logging.getLogger("hedgefs.mount")

LIST_BATCH = 256   # directory entries fetched per step of a readdir (the NameNode pages them itself)


class Operations(pyfuse3.Operations):
    supports_dot_lookup = False
    enable_writeback_cache = False

    def __init__(self, fs: FileSystem, owners: Owners, timeout: float = 1.0):
        super().__init__()
        self.fs = fs
        self.owners = owners
        self.timeout = timeout
        self.inodes = InodeTable()
        self.names = DirectoryNames(self.inodes, fs, timeout)
        self._handles: dict[int, object] = {}
        self._next_fh = 1

    # ------------------------------------------------------------------ helpers

    def _path(self, inode: int) -> str:
        node = self.inodes.get(inode)
        if node is None or node.path is None:
            raise fail(errno.ENOENT)
        return node.path

    def _child(self, parent_inode: int, name: bytes) -> str:
        try:
            text = name.decode("utf-8")
        except UnicodeDecodeError:
            raise fail(errno.EILSEQ, f"not UTF-8: {name!r} (hedgefs names are UTF-8)") from None
        return child(self._path(parent_inode), text)

    def _handle(self, fh: int):
        handle = self._handles.get(fh)
        if handle is None:
            raise fail(errno.EBADF)
        return handle

    def _add_handle(self, handle) -> int:
        fh = self._next_fh
        self._next_fh += 1
        self._handles[fh] = handle
        return fh

    def _attrs(self, status: FileStatus, node: Node) -> pyfuse3.EntryAttributes:
        writer = node.writer
        if isinstance(writer, Edit):   # an existing file changed here: its own attributes, the copy's size
            return attributes(writer.status, node.inode, self.owners, 0, size=writer.written)
        if writer is not None:
            return attributes(self._pending(writer), node.inode, self.owners, 0, size=writer.written)
        node.size = status.length
        if status.is_dir and self.timeout:
            node.dir_status, node.dir_until = status, time.monotonic() + self.timeout
        return attributes(status, node.inode, self.owners, self.timeout)

    def _pending(self, writer: WriteHandle) -> FileStatus:
        """How a file being written here looks until it is committed (the NameNode has none yet)."""
        return FileStatus(writer.path, False, writer.written, "", 0, writer.started_ms,
                          owner=self.owners.cluster_user, permission=writer.mode or 0o644)

    async def _entry(self, path: str, lookups: int = 1) -> pyfuse3.EntryAttributes:
        node = self.inodes.at(path)
        if node is not None and node.writer is not None:
            self.inodes.learn(path, lookups)
            return self._attrs(None, node)
        status = await run(self._stat, path)
        return self._attrs(status, self.inodes.learn(path, lookups))

    def _stat(self, path: str) -> FileStatus:
        """The NameNode's stat; for a file we may not read (stat gives its block locations), the
        entry its directory's listing has, as ``ls -l`` shows one in HDFS."""
        try:
            return self.fs.stat(path)
        except NotAllowed:
            if path == "/":
                raise
            parent = path.rsplit("/", 1)[0] or "/"
            for entry in self.fs.iter_list(parent):
                if entry.path == path:
                    return entry
            raise

    # ------------------------------------------------------------------ names and attributes

    async def lookup(self, parent_inode, name, ctx=None):
        path = self._child(parent_inode, name)
        parent = self.inodes.get(parent_inode)
        if parent is not None:
            known = await self.names.known(parent, path)
            if known is False:   # not kept by the kernel: a name found taken (names.taken) is asked about at once
                return self._negative(0.0)
            if known is not None:
                return self._attrs(known, self.inodes.learn(path, 1))
        try:
            return await self._entry(path)
        except pyfuse3.FUSEError as err:
            if err.errno != errno.ENOENT or not self.timeout:
                raise
            return self._negative()

    def _negative(self, timeout: float | None = None) -> pyfuse3.EntryAttributes:
        """"No such entry", which the kernel keeps for ``timeout`` (a negative dentry): a program
        probing for files (an import path, make, git) asks the NameNode once per name. A file
        another client creates meanwhile appears within the timeout; one made here at once (the
        kernel replaces the negative entry itself on create, mkdir and rename; a name the
        NameNode refuses as taken is dropped from it: ``names.taken``)."""
        a = pyfuse3.EntryAttributes()
        a.st_ino = 0
        a.entry_timeout = self.timeout if timeout is None else timeout
        return a

    async def _making(self, parent_inode: int, name: bytes, fn, *args):
        """``fn(*args)`` (a mkdir, symlink or rename) in a worker thread; EEXIST: see ``names.taken``."""
        try:
            return await run(fn, *args)
        except pyfuse3.FUSEError as err:
            if err.errno == errno.EEXIST:
                self.names.taken(parent_inode, name)
            raise

    async def forget(self, inode_list):
        for inode, n in inode_list:
            self.inodes.forget(inode, n)

    async def getattr(self, inode, ctx=None):
        node = self.inodes.get(inode)
        if node is None or node.path is None:
            raise fail(errno.ENOENT)
        if node.writer is not None:
            return self._attrs(None, node)
        left = node.dir_until - time.monotonic()
        if node.dir_status is not None and left > 0:   # answered for what is left of the timeout, not extended
            return attributes(node.dir_status, node.inode, self.owners, left)
        return self._attrs(await run(self._stat, node.path), node)

    async def setattr(self, inode, attr, fields, fh, ctx):
        path = self._path(inode)
        node = self.inodes.get(inode)
        known = node.dir_status if node.dir_until > time.monotonic() else None
        node.dir_status = None   # (until what the NameNode applied is known: a refusal leaves it unknown)
        writing = self._handles.get(fh) if fh is not None else None
        if not isinstance(writing, Writing):
            writing = None
        if fields.update_size:
            await self._truncate(path, node, writing, attr.st_size)
        pending = node.writer
        owner = group = ""
        mtime = atime = None
        if fields.update_mode:
            if pending is not None:
                pending.mode = attr.st_mode & 0o7777
            else:
                await self._as_owner(self.fs.set_permission, path, attr.st_mode & 0o7777)
        if fields.update_uid or fields.update_gid:
            owner = self.owners.user_name(attr.st_uid) if fields.update_uid else ""
            group = self.owners.group_name(attr.st_gid) if fields.update_gid else ""
            if pending is not None:
                pending.owner = (owner, group)
            else:
                await self._as_owner(self.fs.set_owner, path, owner, group)
        if fields.update_atime or fields.update_mtime:   # utimes(2), touch, rsync -a, tar x: HDFS's setTimes
            mtime = attr.st_mtime_ns // 1_000_000 if fields.update_mtime else None
            atime = attr.st_atime_ns // 1_000_000 if fields.update_atime else None
            if atime is None and known is not None:
                # (tar's utimensat(UTIME_OMIT, mtime)): the atime stays what it shows, also where
                # the NameNode's would follow the new mtime (one never set): known exactly
                atime = known.atime_ms
            if pending is not None:
                pending.times = (mtime if mtime is not None else (pending.times or (None, None))[0],
                                 atime if atime is not None else (pending.times or (None, None))[1])
            else:
                await self._as_owner(self.fs.set_times, path, mtime, atime)
        if known is not None and not fields.update_size:
            # A directory (chmod, chown, utimes of tar x and rsync -a): its status is what it was
            # with what the NameNode just applied, exactly as sent; no stat.
            node.dir_status = dataclasses.replace(
                known, permission=attr.st_mode & 0o7777 if fields.update_mode else known.permission,
                owner=owner or known.owner if fields.update_uid else known.owner,
                group=group or known.group if fields.update_gid else known.group,
                mtime_ms=known.mtime_ms if mtime is None else mtime,
                atime_ms=known.atime_ms if atime is None else atime)
        return await self.getattr(inode)

    async def _as_owner(self, fn, *args):
        """chmod and chown: refused by the NameNode is EPERM, as chmod(2) and chown(2) say."""
        try:
            await run(fn, *args)
        except pyfuse3.FUSEError as err:
            raise fail(errno.EPERM) if err.errno == errno.EACCES else err

    async def _truncate(self, path: str, node: Node, writing: "Writing | None", size: int) -> None:
        if node.writer is not None:
            if size == node.writer.written:
                return
            owner = writing if writing is not None and writing.writer is node.writer else None
            if owner is None:   # truncate(2) by path of a file a descriptor here is writing
                owner = next((h for h in self._handles.values() if isinstance(h, Writing) and h.writer is node.writer),
                             None)
            if owner is None:
                raise fail(errno.EBUSY, f"{path}: truncate to {size} while being written")
            edit = await self._edit(owner)
            await run(edit.truncate, size)
            return
        if writing is not None and size == 0:
            await self._start(writing, overwrite=True)   # O_TRUNC or ftruncate(fd, 0): the new bytes follow
            return
        status = await run(self.fs.stat, path)
        if size == status.length:
            return
        try:
            if size < status.length:
                await run(self.fs.truncate, path, size)   # HDFS's truncate: copy-on-write of the group cut
            else:
                await run(self._extend, path, size - status.length)
        except pyfuse3.FUSEError as err:   # another client is writing it
            raise fail(errno.EBUSY, f"{path}: being written elsewhere") if err.errno == errno.EEXIST else err
        if writing is not None:
            writing.length = size
            if writing.reader is not None:   # its reads: of the new length
                writing.reader.close()
                writing.reader = None
        node.seen = None

    def _extend(self, path: str, zeros: int) -> None:
        """truncate(2) past the end: the file grows by ``zeros`` zero bytes (an append of them)."""
        chunk = bytes(min(zeros, 1 << 20))
        with self.fs.append(path) as writer:
            while zeros > 0:
                zeros -= writer.write(chunk[:min(zeros, len(chunk))])

    # ------------------------------------------------------------------ directories

    async def mkdir(self, parent_inode, name, mode, ctx):
        path = self._child(parent_inode, name)
        began = time.monotonic()
        # One call: made with its mode (tar's mkdirat(0700)), answered with its status (no stat).
        status = await self._making(parent_inode, name, self.fs.mkdir, path, False, mode & 0o7777)
        self.names.added(parent_inode, name)
        node = self.inodes.learn(path, 1)
        entry = self._attrs(status, node)
        self.names.began(node, began)
        return entry

    async def rmdir(self, parent_inode, name, ctx):
        path = self._child(parent_inode, name)
        await run(self.fs.delete, path)
        self.names.removed(parent_inode, name)
        self.inodes.detach(path)

    async def unlink(self, parent_inode, name, ctx):
        path = self._child(parent_inode, name)
        node = self.inodes.at(path)
        if node is not None and node.writer is not None:
            raise fail(errno.EBUSY, f"{path} is being written here")
        await run(self.fs.delete, path)
        self.names.removed(parent_inode, name)
        self.inodes.detach(path)

    async def rename(self, parent_inode_old, name_old, parent_inode_new, name_new, flags, ctx):
        src = self._child(parent_inode_old, name_old)
        dst = self._child(parent_inode_new, name_new)
        if flags & pyfuse3.RENAME_EXCHANGE:
            raise fail(errno.EINVAL, "rename: RENAME_EXCHANGE is not supported")
        for path in (src, dst):
            node = self.inodes.at(path)
            if node is not None and node.writer is not None:
                raise fail(errno.EBUSY, f"{path} is being written here")
        await self._making(parent_inode_new, name_new, self._rename, src, dst, not flags & pyfuse3.RENAME_NOREPLACE)
        self.names.removed(parent_inode_old, name_old)
        self.names.added(parent_inode_new, name_new)
        self.inodes.moved(src, dst)

    def _rename(self, src: str, dst: str, replace: bool) -> None:
        """rename(2) replaces an existing file, atomically: the NameNode's Concat of one part
        with overwrite does that (Rename refuses an existing target). An empty directory is
        replaced by deleting it first (not atomic: the NameNode has no such call)."""
        try:
            self.fs.rename(src, dst)
            return
        except AlreadyExists:
            if not replace:
                raise
        source, target = self.fs.stat(src), self.fs.stat(dst)
        if not source.is_dir and target.is_dir:
            raise WriteFailed(errno.EISDIR, f"rename {src}: {dst} is a directory")
        if source.is_dir and not target.is_dir:
            raise WriteFailed(errno.ENOTDIR, f"rename {src}: {dst} is not a directory")
        if source.is_dir:
            self.fs.delete(dst)   # "directory not empty" if it is not: ENOTEMPTY, as rename(2)
            self.fs.rename(src, dst)
        else:
            self.fs.concat(dst, [src], overwrite=True)

    async def opendir(self, inode, ctx):
        path = self._path(inode)
        return self._add_handle(Listing(path, self.fs.iter_list(path)))

    async def readdir(self, fh, start_id, token):
        listing = self._handle(fh)
        index = start_id
        while True:
            if index >= len(listing.entries):
                if listing.done:
                    return
                await run(listing.pull, index + LIST_BATCH)
                continue
            status = listing.entries[index]
            name = status.path.rsplit("/", 1)[1]
            node = self.inodes.learn(status.path, 0)
            if not pyfuse3.readdir_reply(token, name.encode("utf-8"), self._attrs(status, node), index + 1):
                self.inodes.forget(node.inode, 0)
                return
            node.lookups += 1
            index += 1

    async def releasedir(self, fh):
        self._handles.pop(fh, None)

    async def fsyncdir(self, fh, datasync):
        pass   # every namespace change is committed at the NameNode before its call returns

    # ------------------------------------------------------------------ files

    async def open(self, inode, flags, ctx):
        node = self.inodes.get(inode)
        path = self._path(inode)
        if flags & os.O_ACCMODE == os.O_RDONLY:
            reader = await run(self.fs.open, path)
            seen, node.seen = node.seen, version(reader.status)
            handle = ReadHandle(reader)
            handle.node = node
            return pyfuse3.FileInfo(fh=self._add_handle(handle), keep_cache=seen == node.seen)
        if node.writer is not None:
            raise fail(errno.EBUSY, f"{path} is already being written here")
        status = await run(self.fs.stat, path)
        if status.is_dir:
            raise fail(errno.EISDIR)
        writing = Writing(node, path, status.length, append=bool(flags & os.O_APPEND))
        if flags & os.O_TRUNC:
            await self._start(writing, overwrite=True)
        return pyfuse3.FileInfo(fh=self._add_handle(writing))

    async def create(self, parent_inode, name, mode, flags, ctx):
        path = self._child(parent_inode, name)
        node = self.inodes.learn(path, 1)
        writing = Writing(node, path, 0)
        try:
            await self._start(writing, overwrite=False, mode=mode & 0o7777)
        except pyfuse3.FUSEError as err:
            self.inodes.forget(node.inode, 1)
            if err.errno in (errno.EEXIST, errno.EISDIR):
                self.names.taken(parent_inode, name)
                if flags & os.O_EXCL:   # open(2): EEXIST for anything at the name, a directory too
                    raise fail(errno.EEXIST) from None
            raise
        self.names.added(parent_inode, name)
        fh = self._add_handle(writing)
        return pyfuse3.FileInfo(fh=fh), self._attrs(None, node)

    async def read(self, fh, off, size):
        handle = self._handle(fh)
        if isinstance(handle, Writing):
            if handle.writer is None:   # (O_RDWR) nothing written yet: the file as committed
                if handle.reader is None:
                    handle.reader = ReadHandle(await run(self.fs.open, handle.path))
                handle = handle.reader
            else:                       # what this descriptor wrote: its working copy
                edit = await self._edit(handle)
                return await run(edit.read, off, size)
        if off + size > handle.length and handle.node is not None and handle.node.size > handle.length:
            await self._follow(handle)   # the kernel was told of a longer file (appended to elsewhere): read that
        try:
            try:
                data = await self._fetch(handle, off, size)
            except FileChanged:   # replaced since it was opened: an append's new version, say
                if not await self._follow(handle):
                    raise
                data = await self._fetch(handle, off, size)
        except HedgefsError as err:
            raise as_fuse_error(err) from None
        return bytes(data)

    @staticmethod
    async def _fetch(handle: ReadHandle, off: int, size: int):
        try:
            return await wait(handle.fetch(off, size))
        except concurrent.futures.CancelledError:   # a random read on this descriptor dropped it
            return await wait(handle.reader.submit(off, max(0, min(size, handle.length - off))))

    async def _follow(self, handle: ReadHandle) -> bool:
        """An open file reads on into a newer version of the same inode (appended to, written in
        place: the file id is kept) that is at least as long (``tail -f``): True if it moved to
        one. Another file put at its path (an overwrite, a rename over it) is not followed: the
        descriptor reads what it opened while that lasts, then ESTALE, as a shorter one."""
        try:
            fresh = await run(self.fs.open, handle.reader.status.path)
        except pyfuse3.FUSEError:
            return False
        old = handle.reader.status
        if fresh.length < handle.length or fresh.status.file_id != old.file_id or version(fresh.status) == version(old):
            fresh.close()
            return False
        handle.follow(fresh)
        return True

    async def write(self, fh, off, buf):
        """In order (a new file, O_TRUNC, O_APPEND, a write at the end): streamed into stripes as
        written. Anywhere else: a working copy (Edit), committed copy-on-write at fsync or close."""
        writing = self._handle(fh)
        if writing.error:
            raise fail(writing.error)
        w = writing.writer
        if w is None:
            if writing.append or (writing.length and off == writing.length):   # >>, or a write at the end
                await self._start(writing, overwrite=False, append=True)
            elif not writing.length and off == 0:
                await self._start(writing, overwrite=True)
            else:
                await self._edit(writing)
        elif not isinstance(w, Edit):
            at_end = writing.append or off == w.written
            if w.committed is not None and at_end:
                await self._write_on(writing)
            elif not at_end:
                await self._edit(writing)
        if writing.append:
            off = writing.writer.written   # O_APPEND: at the end, whatever the kernel thought the size was
        return await run(writing.writer.write, off, buf)

    async def _write_on(self, writing: Writing) -> None:
        """A write at the end after a close(2) of a duplicate (or an fsync) committed the file: an
        append to what was committed."""
        old = writing.writer
        writing.writer = None
        await self._start(writing, overwrite=False, append=True)
        writing.writer.mode, writing.writer.owner = old.mode, old.owner

    async def _edit(self, writing: Writing) -> Edit:
        """This descriptor's working copy (Edit), made now if it has none: what it streamed so far
        is committed first, then the file is read into the copy."""
        w = writing.writer
        if isinstance(w, Edit):
            return w
        if w is not None:
            if w.committed is None:
                await self._commit(writing)
            writing.writer = None
        edit = await run(Edit, self.fs, writing.path)
        if writing.writer is not None:   # another request on this descriptor made one meanwhile
            edit.abort()
            return writing.writer
        if writing.reader is not None:
            writing.reader.close()
            writing.reader = None
        writing.writer = writing.node.writer = edit
        writing.node.seen = None
        return edit

    async def _start(self, writing: Writing, overwrite: bool, mode: int | None = None, append: bool = False) -> None:
        """Create (or reopen for an append) the file at the NameNode (in a worker thread: its
        refusal is this call's errno)."""
        if writing.writer is None:
            try:
                writer = await run(WriteHandle, self.fs, writing.path, overwrite, mode, append)
            except pyfuse3.FUSEError as err:   # an append to a file another client is writing
                raise fail(errno.EBUSY, f"{writing.path}: being written elsewhere") \
                    if append and err.errno == errno.EEXIST else err
            if writing.writer is not None:   # another request on this descriptor started one meanwhile
                await run(writer.abort)
                return
            writing.writer = writer
            writing.node.writer = writing.writer
            writing.node.seen = None

    async def flush(self, fh):
        """close(2): what was written through this descriptor is committed now, and a failure is
        close's error. Every close commits, even with nothing written: the kernel does not say
        which close is the last (a fork+exec closes the descriptor in the child too), and a
        program renames or stats the file right after it. Writing on rewrites (_write_on)."""
        handle = self._handles.get(fh)
        if not isinstance(handle, Writing) or handle.writer is None or handle.error:
            return
        writer = handle.writer
        if writer.committed is None or isinstance(writer, Edit):
            try:
                await self._commit(handle)
            except pyfuse3.FUSEError as err:
                handle.error = err.errno
                raise

    async def _commit(self, writing: Writing) -> None:
        writer = writing.writer
        try:
            await run(writer.commit)
        except pyfuse3.FUSEError as err:   # a working copy of a file another client is writing now
            raise fail(errno.EBUSY, f"{writing.path}: being written elsewhere") \
                if isinstance(writer, Edit) and err.errno == errno.EEXIST else err
        finally:
            if writing.node.writer is writer and not isinstance(writer, Edit):   # (an Edit lasts until release)
                writing.node.writer = None
        writing.node.seen = None

    async def release(self, fh):
        handle = self._handles.pop(fh, None)
        if isinstance(handle, ReadHandle):
            handle.close()
        elif isinstance(handle, Writing) and handle.reader is not None:
            handle.reader.close()
        if isinstance(handle, Writing) and handle.writer is not None:
            if handle.writer.committed is None and not handle.error:
                try:
                    await self._commit(handle)   # no flush came (the kernel sends one per close)
                except pyfuse3.FUSEError as err:
                    log.warning("%s: not committed: %s", handle.path, os.strerror(err.errno))
            handle.writer.abort()
            if handle.node.writer is handle.writer:
                handle.node.writer = None

    async def fsync(self, fh, datasync):
        """Durable: what this descriptor wrote is committed now (a stream, or a working copy's
        changes), and a failure is fsync's error; writing on continues (an append, or the copy)."""
        handle = self._handle(fh)
        if isinstance(handle, Writing):
            await self.flush(fh)
            if handle.error:
                raise fail(handle.error)

    async def statfs(self, ctx):
        stats = pyfuse3.StatvfsData()
        stats.f_bsize = stats.f_frsize = 4096
        used, capacity = await trio.to_thread.run_sync(self._space)
        stats.f_blocks = capacity // 4096
        stats.f_bfree = stats.f_bavail = max(0, capacity - used) // 4096
        stats.f_files = stats.f_ffree = stats.f_favail = 0
        stats.f_namemax = 255
        return stats

    def _space(self) -> tuple[int, int]:
        """(used, capacity) bytes of the live DataNodes; (0, 0) if this user may not know."""
        try:
            report = self.fs.admin.report()
        except NotAllowed:
            return 0, 0
        except HedgefsError as err:
            log.info("statfs: %s", err)
            return 0, 0
        live = report.live()
        used = sum(d.used_bytes for d in live)
        capacity = max(used, sum(d.capacity_bytes for d in live))
        return used, capacity

    # ------------------------------------------------------------------ refused

    async def link(self, inode, new_parent_inode, new_name, ctx):
        raise fail(errno.EPERM, "hard links are not supported")

    async def mknod(self, parent_inode, name, mode, rdev, ctx):
        raise fail(errno.EPERM, "only regular files, directories and symbolic links")

    # ------------------------------------------------------------------ links and extended attributes

    async def symlink(self, parent_inode, name, target, ctx):
        path = self._child(parent_inode, name)
        try:
            text = target.decode("utf-8")
        except UnicodeDecodeError:
            raise fail(errno.EILSEQ, f"symlink {path}: the target is not UTF-8") from None
        await self._making(parent_inode, name, self.fs.symlink, text, path)
        self.names.added(parent_inode, name)
        return await self._entry(path)

    async def readlink(self, inode, ctx):
        status = await run(self.fs.stat, self._path(inode))
        if not status.is_link:
            raise fail(errno.EINVAL)
        return status.symlink.encode("utf-8")

    @staticmethod
    def _xattr_name(name: bytes) -> str:
        """Only the user namespace is kept: trusted., security., system. (ACLs) are ENOTSUP."""
        if not name.startswith(b"user."):
            raise fail(errno.ENOTSUP)
        try:
            return name.decode("utf-8")
        except UnicodeDecodeError:
            raise fail(errno.EILSEQ) from None

    async def setxattr(self, inode, name, value, ctx):
        await run(self.fs.set_xattr, self._path(inode), self._xattr_name(name), value)

    async def getxattr(self, inode, name, ctx):
        key = self._xattr_name(name)
        value = (await run(self.fs.get_xattrs, self._path(inode))).get(key)
        if value is None:
            raise fail(pyfuse3.ENOATTR)
        return value

    async def listxattr(self, inode, ctx):
        node = self.inodes.get(inode)
        if node is not None and node.writer is not None:
            return []
        return [name.encode("utf-8") for name in await run(self.fs.get_xattrs, self._path(inode))]

    async def removexattr(self, inode, name, ctx):
        key = self._xattr_name(name)
        try:
            await run(self.fs.remove_xattr, self._path(inode), key)
        except pyfuse3.FUSEError as err:
            raise fail(pyfuse3.ENOATTR) if err.errno == errno.ENOENT else err


for _name, _method in list(vars(Operations).items()):
    if not _name.startswith("_") and inspect.iscoroutinefunction(_method):
        setattr(Operations, _name, guarded(_method))
