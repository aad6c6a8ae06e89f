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
import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Awaitable, Callable

from hedgefs.client.errors import DataUnavailable, FileChanged, HedgefsError, NotFound
from hedgefs.client.locations import FileStatus
from hedgefs.client.reader import HedgedReader, gather_or_cancel
from hedgefs.client.streams import Stream
from hedgefs.ec import layout
from hedgefs.ec.policy import parse_policy

if TYPE_CHECKING:
    from hedgefs.client.checksum import FileChecksum
    from hedgefs.client.latency import LatencyModel
    from hedgefs.client.loop import LoopThread
    from hedgefs.client.metrics import ClientMetrics
    from hedgefs.client.transport import DataNodeClient

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


CHUNK_BYTES = 8 << 20   # a stream's window: whole stripes, about this many bytes


@dataclasses.dataclass(frozen=True)
class ReadServices:
    """What an open file reads through, shared by every file a FileSystem opens: the client's
    event loop, the hedged reader, and the locator (the NameNode's GetFileInfo: where the units
    are now, fresh tokens). ``metrics``/``model``/``datanodes``: counters, the latency model's
    trouble clock, and the DataNodes' client (checksums)."""

    loop: "LoopThread"
    hedged: HedgedReader
    locate: Callable[[str], Awaitable[FileStatus]]
    metrics: "ClientMetrics"
    model: "LatencyModel"
    datanodes: "DataNodeClient"


class FileReader:
    """An open file: positional reads, and ranged streams with read-ahead."""

    def __init__(self, services: ReadServices, status: FileStatus):
        self._io = services
        self.status = status
        self.length = status.length
        self._located = time.monotonic()
        self._relocating: asyncio.Task | None = None
        self._renewing: asyncio.Future | None = None

    def pread(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0:
            raise ValueError("offset and length must be >= 0")
        length = max(0, min(length, self.length - offset))
        return self._io.loop.call(self._read(offset, length))

    def submit(self, offset: int, length: int, exclude: frozenset[str] = frozenset(),
               into: bytearray | None = None) -> "concurrent.futures.Future":
        """Start a positional read; the Future's ``cancel()`` stops it and its unit reads.
        Units on DataNodes in ``exclude`` are rebuilt from other units where possible. ``into``:
        a buffer of at least ``length`` bytes to read into (the Future then gives a view of it),
        the caller's not to touch until the Future is done."""
        if offset < 0 or length < 0:
            raise ValueError("offset and length must be >= 0")
        length = max(0, min(length, self.length - offset))
        return self._io.loop.submit(self._read(offset, length, exclude, into))

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
                return await self._watched(self._pread(status, offset, length, exclude, into), status)
            except DataUnavailable:
                if attempt == _RELOCATIONS:
                    raise
                try:
                    fresh = await self._io.locate(status.path)
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
                    self._io.metrics.incr("token_refreshes")
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
                    check = asyncio.ensure_future(self._io.locate(status.path))
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
        if (self._relocating is not None or self._io.model.last_trouble <= self._located
                or now - self._located < RELOCATE_S):
            return
        self._located = now
        self._relocating = asyncio.ensure_future(self._relocate())

    async def _relocate(self) -> None:
        try:
            fresh = await self._io.locate(self.status.path)
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
        file_policy = parse_policy(self.status.policy)
        for g in self.status.groups:
            policy = g.code(file_policy)   # (an open tail's: replicated)
            if not policy.decodable(set(g.units) | layout.zero_units(policy, g.length)):   # (a small file's zeros)
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
                    fresh = await self._io.locate(status.path)
                except HedgefsError as err:
                    log.info("cannot renew the block tokens of %s: %s", status.path, err)
                    return self.status
                if [g.id for g in fresh.groups] == [g.id for g in status.groups]:
                    self.status = fresh
                    self._io.metrics.incr("token_refreshes")
                return self.status
            self._renewing = asyncio.ensure_future(renew())
        return asyncio.shield(self._renewing)

    async def _pread(self, status: FileStatus, offset: int, length: int, exclude: frozenset[str],
                     into: bytearray | None) -> bytearray | memoryview:
        """The bytes [offset, offset+length) as ``status`` places them: a new bytearray, or a view
        of ``into`` filled with them."""
        self._io.metrics.incr("reads")
        policy = parse_policy(status.policy)
        out = bytearray(length) if into is None else into
        view = memoryview(out)[:length]
        pieces = layout.file_range_to_groups(offset, length, policy, status.block_size, status.length)
        await gather_or_cancel(
            self._io.hedged.read_group_range(   # each group in its own code (an open tail: replicas)
                status.groups[p.group_index].code(policy), status.groups[p.group_index], p.offset_in_group, p.length,
                view[p.offset_in_file - offset:p.offset_in_file - offset + p.length], exclude)
            for p in pieces
        )
        return out if into is None else view

    def checksum(self) -> "FileChecksum":
        from hedgefs.client import checksum as _checksum

        status = self.status
        return self._io.loop.call(_checksum.file_checksum(
            self._io.datanodes, parse_policy(status.policy), status.groups, status.length, self._read))

    def chunk_size(self, about: int = CHUNK_BYTES) -> int:
        """A stream's window: whole stripes, about ``about`` bytes (at least one stripe: a whole
        stripe is what a degraded read decodes at once)."""
        stripe = parse_policy(self.status.policy).stripe_data_size
        return stripe * max(1, about // stripe)

    def stream(self, start: int = 0, end: int | None = None, read_ahead: int = 2, reuse: bool = False,
               window: int = CHUNK_BYTES) -> Stream:
        """Bytes [start, end) (to the end: None) in order, in windows of about ``window`` bytes
        (whole stripes), ``read_ahead`` of them in flight besides the one being consumed: iterate
        for chunks, or ``read(n)`` (streams.py). ``reuse``: chunks are views of ``read_ahead + 1``
        buffers, each valid only until the next is asked for (a lease: use it as a context
        manager); otherwise each chunk is the caller's own."""
        end = self.length if end is None else min(end, self.length)
        if start < 0 or end < 0:
            raise ValueError("start and end must be >= 0")
        return Stream(self, min(start, end), end, self.chunk_size(window), read_ahead, reuse)

    def chunks(self, read_ahead: int = 2, reuse: bool = False) -> Stream:
        """The whole file in order: ``stream()``."""
        return self.stream(read_ahead=read_ahead, reuse=reuse)

    def close(self) -> None:
        pass

    def __enter__(self) -> "FileReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
