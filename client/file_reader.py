"""An open file: positional reads, sequential chunks with read-ahead, and what keeps them valid.

Units move (repair onto a spare, a DataNode restarted on a new port); a file's block groups do
not, so an open file that finds too few units answering asks the NameNode where they are now
and reads again. A file converted to another policy meanwhile (``ec convert``) holds the same
bytes in new groups: the range is read again from them, never a mix of two layouts. A file
replaced meanwhile (overwritten, or deleted) is a different file: the read fails with "the file
changed while it was read" (or "was deleted"), never with bytes of the new one. Block tokens
expire: they are renewed before they do (in the background: a read waits for the NameNode only
once the tokens it holds have expired), and once more after a failed read. So reads of an open
file go on through a NameNode failover: they need only the DataNodes.
"""

import asyncio
import concurrent.futures
import logging
import time
from typing import TYPE_CHECKING, Iterator

from hedgefs.client.errors import DataUnavailable, FileChanged, HedgefsError, NotFound
from hedgefs.client.locations import FileStatus
from hedgefs.ec.policy import parse_policy

if TYPE_CHECKING:
    from hedgefs.client.checksum import FileChecksum

log = logging.getLogger("hedgefs.client.fs")

_RELOCATIONS = 3   # times a read locates its file again (units moved, the file was converted)
# While the latency model reports trouble (a slow or silent DataNode), an open file asks the
# NameNode where its units are at most this often: a DataNode it declared dead drops out, and
# units it has rebuilt elsewhere are read there.
RELOCATE_S = 5.0
# A read still running after this long asks the NameNode (and again each time as long again)
# whether its file is still there: a file deleted or replaced under a read takes its units away,
# and the read would otherwise wait for the DataNodes it has left, a frozen one's deadline included.
WATCH_S = 2.0


def _new_locations(cached: FileStatus, fresh: FileStatus) -> bool:
    """Does `fresh` (the same file: the same block groups) put some unit somewhere `cached` did not?"""
    if [g.id for g in fresh.groups] != [g.id for g in cached.groups]:
        return False  # another file now has this path
    return any(loc != old.units.get(i) for new, old in zip(fresh.groups, cached.groups) for i, loc in new.units.items())


def _replaced(cached: FileStatus, fresh: FileStatus) -> bool:
    """Is `fresh` another file at the same path (other block groups, a later version)?"""
    return fresh.is_dir or [g.id for g in fresh.groups] != [g.id for g in cached.groups]


def _converted(cached: FileStatus, fresh: FileStatus) -> bool:
    """Is `fresh` the bytes of `cached` in another policy (``ec convert``)? A conversion keeps the
    mtime, and every other replacement of a file gets a later one (the NameNode sees to it)."""
    return (fresh.policy != cached.policy and not fresh.is_dir and
            (fresh.length, fresh.mtime_ms) == (cached.length, cached.mtime_ms))


class FileReader:
    """An open file: positional reads, and sequential chunks with read-ahead."""

    def __init__(self, fs, status: FileStatus):   # fs: the FileSystem that opened it (fs.py)
        self._fs = fs
        self.status = status
        self.length = status.length
        self._located = time.monotonic()
        self._relocating: asyncio.Task | None = None
        self._renewing: asyncio.Future | None = None

    def pread(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0:
            raise ValueError("offset and length must be >= 0")
        length = max(0, min(length, self.length - offset))
        return self._fs._call(self._read(offset, length))

    def submit(self, offset: int, length: int, exclude: frozenset[str] = frozenset()) -> "concurrent.futures.Future":
        """Start a positional read; the Future's ``cancel()`` stops it and its unit reads.
        Units on DataNodes in ``exclude`` are rebuilt from other units where possible."""
        if offset < 0 or length < 0:
            raise ValueError("offset and length must be >= 0")
        length = max(0, min(length, self.length - offset))
        return self._fs._submit(self._read(offset, length, exclude))

    async def _read(self, offset: int, length: int, exclude: frozenset[str] = frozenset(),
                    into: bytearray | None = None) -> bytearray | memoryview:
        """Read with the cached unit locations; if too few units answer, locate again (the
        module's docstring says when that is safe, and when the read fails instead)."""
        self._maybe_relocate()
        for attempt in range(_RELOCATIONS + 1):
            status = self.status
            if status.renew_tokens_at and time.monotonic() >= status.renew_tokens_at:
                # Renewed in the background while the tokens held are still good: a read never
                # waits on the NameNode (nor on a NameNode failover) until they have expired.
                renewal = self._renew(status)
                if time.monotonic() >= status.tokens_expire_at:
                    status = await renewal
            try:
                return await self._watched(self._fs._pread(status, offset, length, exclude, into), status)
            except DataUnavailable:
                if attempt == _RELOCATIONS:
                    raise
                try:
                    fresh = await self._fs._stat(status.path)
                except NotFound:
                    raise FileChanged(f"{status.path} was deleted while it was read") from None
                converted = _converted(status, fresh)
                if not converted and _replaced(status, fresh):
                    raise FileChanged(f"{status.path}: the file changed while it was read (it was replaced)") from None
                renewed = bool(status.renew_tokens_at) and [g.id for g in fresh.groups] == [g.id for g in status.groups]
                if not _new_locations(status, fresh) and not converted and not renewed:
                    raise  # nothing moved: reading again would only wait on the same DataNodes
                if converted:
                    log.info("%s was converted from %s to %s while being read: reading the new layout",
                             status.path, status.policy, fresh.policy)
                elif renewed:
                    self._fs.metrics.incr("token_refreshes")
                if self.status is status:
                    self.status = fresh

    async def _watched(self, read, status: FileStatus):
        """Await ``read``; while it runs past WATCH_S, check every WATCH_S that the file is the
        one it reads, and end it with FileChanged as soon as the file was deleted or replaced
        (never with bytes of another file). A NameNode that does not answer changes nothing."""
        task = asyncio.ensure_future(read)
        check: asyncio.Task | None = None
        try:
            while True:
                waiting = {task} if check is None else {task, check}
                done, _ = await asyncio.wait(waiting, timeout=WATCH_S if check is None else None,
                                             return_when=asyncio.FIRST_COMPLETED)
                if task in done:
                    return task.result()
                if check is None:
                    check = asyncio.ensure_future(self._fs._stat(status.path))
                    continue
                try:
                    fresh = check.result()
                except NotFound:
                    raise FileChanged(f"{status.path} was deleted while it was read") from None
                except HedgefsError:
                    fresh = status
                check = None
                if not _converted(status, fresh) and _replaced(status, fresh):
                    raise FileChanged(f"{status.path}: the file changed while it was read (it was replaced)")
        finally:
            if check is not None:
                if check.done():
                    if not check.cancelled():
                        check.exception()   # looked at: a check the read outran is not an error
                else:
                    check.cancel()
            if not task.done():
                task.cancel()

    def _maybe_relocate(self) -> None:
        """Ask the NameNode again where the units are (in the background) when the latency model
        has seen trouble since we last asked, at most every RELOCATE_S: reads then skip a DataNode
        it has declared dead, even while the breaker is open."""
        now = time.monotonic()
        if (self._relocating is not None or self._fs.model.last_trouble <= self._located
                or now - self._located < RELOCATE_S):
            return
        self._located = now
        self._relocating = asyncio.ensure_future(self._relocate())

    async def _relocate(self) -> None:
        try:
            fresh = await self._fs._stat(self.status.path)
            same_groups = [g.id for g in fresh.groups] == [g.id for g in self.status.groups]
            if same_groups and fresh.groups != self.status.groups:
                log.info("%s: unit locations changed (a DataNode died or units moved); reading the new ones",
                         self.status.path)
                self.status = fresh
        except HedgefsError as err:
            log.info("cannot locate %s again: %s", self.status.path, err)
        finally:
            self._relocating = None

    def check_available(self) -> None:
        """DataUnavailable if a block group's live units cannot give its bytes (fewer than k of
        RS, no replica, an LRC pattern that does not decode), as the NameNode sees it: a caller
        checks before writing out any byte, so a file known to be unreadable gives a clean error
        and no partial output."""
        policy = parse_policy(self.status.policy)
        for g in self.status.groups:
            if not policy.decodable(g.units):
                where = (f"block {g.id} has no live replica (of {policy.units})" if policy.replicated else
                         f"block group {g.id}'s {len(g.units)} live units cannot decode it ({policy.name})"
                         if policy.local_groups else
                         f"block group {g.id} has {len(g.units)} live units, {policy.k} needed")
                raise DataUnavailable(f"data unavailable: {self.status.path}: {where}")

    def _renew(self, status: FileStatus) -> "asyncio.Future[FileStatus]":
        """Fresh locations and tokens for the same file, asked once for all the reads that want
        them (a future: await it, or not). A renewal that fails (the NameNode unreachable past the
        failover deadline) leaves the status as it was; the next read past the renewal time asks
        again."""
        if self._renewing is None or self._renewing.done():
            async def renew() -> FileStatus:
                try:
                    fresh = await self._fs._stat(status.path)
                except HedgefsError as err:
                    log.info("cannot renew the block tokens of %s: %s", status.path, err)
                    return self.status
                if [g.id for g in fresh.groups] == [g.id for g in status.groups]:
                    self.status = fresh
                    self._fs.metrics.incr("token_refreshes")
                return self.status
            self._renewing = asyncio.ensure_future(renew())
        return asyncio.shield(self._renewing)

    def checksum(self) -> "FileChecksum":
        from hedgefs.client import checksum as _checksum

        status = self.status
        return self._fs._call(_checksum.file_checksum(
            self._fs.datanodes, parse_policy(status.policy), status.groups, status.length, self._read))

    def chunks(self, read_ahead: int = 2, reuse: bool = False) -> Iterator[bytearray | memoryview]:
        """The whole file in order, a few stripes per chunk, with `read_ahead` chunks in flight.

        ``reuse``: chunks are views of ``read_ahead + 1`` buffers used again and again, each valid
        only until the next chunk is asked for: what a copy to a file or a pipe needs, without
        a fresh (zeroed, page-faulted) buffer per chunk."""
        policy = parse_policy(self.status.policy)
        size = policy.stripe_data_size * max(1, (8 << 20) // policy.stripe_data_size)
        offsets = list(range(0, self.length, size))
        inflight: list = []   # (buffer or None, future)
        free: list[bytearray] = []
        try:
            for offset in offsets:
                buf = (free.pop() if free else bytearray(size)) if reuse else None
                inflight.append((buf, self._fs._submit(self._read(offset, min(size, self.length - offset), into=buf))))
                if len(inflight) > read_ahead:
                    buf, future = inflight.pop(0)
                    yield future.result()
                    if buf is not None:
                        free.append(buf)   # the consumer asked for the next chunk: done with this one
            while inflight:
                yield inflight.pop(0)[1].result()
        finally:
            for _buf, future in inflight:
                future.cancel()

    def close(self) -> None:
        pass

    def __enter__(self) -> "FileReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
