"""The client library's API: a FileSystem over the NameNode and DataNodes.

The public methods are ordinary blocking calls, safe to use from several threads at once; the
network I/O behind them runs on one private event loop (loop.py). Writes are the writer's job
(writer.py), reads the hedged reader's (reader.py); this module names files and hands over.

A secure cluster: given a credential (``credentials``, else the file ``HEDGEFS_CREDENTIALS``
names), every channel is TLS with it and the block tokens that come with unit locations go with
every unit read and write. Tokens expire: an open file renews its locations (and tokens) when
three quarters of their lifetime have passed, and once more if a read fails anyway, so a long
``cat`` or benchmark never notices. A connection TLS refuses is explained (``tls.diagnose``) and
is a NotAllowed error (exit 4), not "unreachable".
"""

import asyncio
import concurrent.futures
import dataclasses
import io
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Awaitable, BinaryIO, Callable, Iterator

import grpc

from hedgefs.client.breaker import CircuitBreaker
from hedgefs.client.config import HedgeConfig
from hedgefs.client.errors import (
    DataUnavailable,
    HedgefsError,
    IsADirectory,
    NotFound,
    UsageError,
    from_namenode_error,
)
from hedgefs.client.latency import LatencyModel
from hedgefs.client.loop import LoopThread
from hedgefs.client.metrics import ClientMetrics, ReadStats, breaker_tripped, watch_breaker
from hedgefs.client.reader import GroupLocation, HedgedReader, UnitLocation, gather_or_cancel
from hedgefs.client.transport import DataNodeClient, TransferError
from hedgefs.ec import layout
from hedgefs.ec.policy import parse_policy
from hedgefs.proto import GRPC_OPTIONS, hedgefs_pb2_grpc
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.security import tls
from hedgefs.security.identity import NAMENODE_NAME, Credential, CredentialError

if TYPE_CHECKING:
    from hedgefs.client.checksum import FileChecksum

DEFAULT_NAMENODE = "127.0.0.1:8020"
NAMENODE_TIMEOUT_S = 10.0
_RELOCATIONS = 3   # times a read locates its file again (units moved, the file was converted)
# While the latency model reports trouble (a slow or silent DataNode), an open file asks the
# NameNode where its units are at most this often: a DataNode it declared dead drops out, and
# units it has rebuilt elsewhere are read there.
RELOCATE_S = 5.0

log = logging.getLogger("hedgefs.client.fs")


def namenode_address(explicit: str | None = None) -> str:
    return explicit or os.environ.get("HEDGEFS_NAMENODE") or DEFAULT_NAMENODE


FROM_ENVIRONMENT = "$HEDGEFS_CREDENTIALS"


def credentials_from(explicit: "str | Credential | None" = FROM_ENVIRONMENT) -> Credential | None:
    """The client's credential: ``explicit`` (a path, or a loaded one; None: none, an insecure
    cluster), by default the file ``HEDGEFS_CREDENTIALS`` names (if set). A bad file is a UsageError."""
    if explicit is None or isinstance(explicit, Credential):
        return explicit
    path = os.environ.get("HEDGEFS_CREDENTIALS") if explicit == FROM_ENVIRONMENT else explicit
    if not path:
        return None
    from hedgefs.security.material import load_credential   # cryptography: only when secure

    try:
        return load_credential(path)
    except CredentialError as err:
        raise UsageError(str(err)) from None


@dataclasses.dataclass(frozen=True)
class FileStatus:
    path: str
    is_dir: bool
    length: int
    policy: str
    block_size: int
    mtime_ms: int
    groups: tuple[GroupLocation, ...] = ()
    owner: str = ""
    group: str = ""
    permission: int = 0
    # When its block tokens should be renewed (time.monotonic(); 0 = it has none).
    renew_tokens_at: float = 0.0

    @classmethod
    def from_proto(cls, info: pb.FileInfo) -> "FileStatus":
        groups = tuple(
            GroupLocation(
                id=g.id,
                length=g.length,
                units={u.index: UnitLocation(u.index, u.datanode_id, u.address, u.data_address, u.token)
                       for u in g.units},
                generation=g.generation,
            )
            for g in info.groups
        )
        renew = time.monotonic() + 0.75 * info.token_lifetime_ms / 1000 if info.token_lifetime_ms else 0.0
        return cls(info.path, info.is_dir, info.length, info.policy, info.block_size, info.mtime_ms, groups,
                   info.owner, info.group, info.permission, renew)


class FileSystem:
    def __init__(self, namenode: str | None = None, hedge: HedgeConfig | None = None,
                 credentials: "str | Credential | None" = FROM_ENVIRONMENT):
        self.namenode = namenode_address(namenode)
        self.credential = credentials_from(credentials)
        self.hedge = hedge or HedgeConfig.from_sources()
        self.metrics = ClientMetrics()
        self.model = LatencyModel()   # per-DataNode latency: thresholds, who is slow or silent
        self.breaker = CircuitBreaker(self.hedge, on_trip=breaker_tripped, model=self.model)
        watch_breaker(self.breaker)
        self._loop = LoopThread()
        self._call(self._init_channels())
        self._blocking_lock = threading.Lock()
        self._blocking: "hedgefs_pb2_grpc.NameNodeStub | None" = None   # rpc()'s, made on first use
        self._closed = False

    async def _init_channels(self) -> None:
        self._nn_channel = tls.channel(self.namenode, self.credential, NAMENODE_NAME, GRPC_OPTIONS, aio=True)
        self._nn = hedgefs_pb2_grpc.NameNodeStub(self._nn_channel)
        self.datanodes = DataNodeClient(tls=tls.client_context(self.credential) if self.credential else None)
        self._reader = HedgedReader(self.datanodes, self.hedge, self.breaker, self.metrics, self.model, self._report_bad)
        self._reported: set[tuple[int, int, str]] = set()
        self._reports: set[asyncio.Task] = set()

    def _report_bad(self, group: GroupLocation, index: int, loc: UnitLocation) -> None:
        """A read of a unit failed its checksum: ask its DataNode to check its copy on disk (in
        the background, once per unit); a damaged copy it reports to the NameNode for repair,
        an intact one means the bytes went bad on the way (and no healthy unit is dropped)."""
        group_id = group.id
        key = (group_id, index, loc.datanode_id)
        if key in self._reported:
            return
        self._reported.add(key)

        async def report() -> None:
            try:
                answer = await self.datanodes.verify(loc.data_address, group_id, index, generation=group.generation,
                                                     token=loc.token, peer=loc.datanode_id)
                log.info("%s checked unit %d/%d: %s", loc.datanode_id, group_id, index, answer)
            except (TransferError, TimeoutError) as err:
                log.info("cannot have %s check unit %d/%d: %s", loc.datanode_id, group_id, index, err)

        task = asyncio.ensure_future(report())
        self._reports.add(task)
        task.add_done_callback(self._reports.discard)

    def _call(self, coro):
        return self._loop.call(coro)

    def _submit(self, coro) -> "concurrent.futures.Future":
        return self._loop.submit(coro)

    async def _rpc(self, method: str, request):
        try:
            return await getattr(self._nn, method)(request, timeout=NAMENODE_TIMEOUT_S)
        except grpc.RpcError as err:
            refusal = None
            if err.code() == grpc.StatusCode.UNAVAILABLE:
                # gRPC says "Socket closed" whether TLS refused us or the NameNode is down: ask.
                refusal = await asyncio.get_running_loop().run_in_executor(
                    None, tls.diagnose, self.namenode, self.credential, NAMENODE_NAME, "the NameNode")
            raise from_namenode_error(err, self.namenode, refusal) from None

    def call_soon(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the client's I/O thread as soon as it is free: how late it runs is
        how busy that thread is (``hedgefs bench read`` samples it)."""
        self._loop.call_soon(callback)

    def rpc(self, method: str, request):
        """Call a NameNode method by name (blocking); errors become HedgefsError.

        From the calling thread, on a blocking channel of its own: no hop to the client's event
        loop and back, which cost a third of the client's CPU per call (``hedgefs bench namenode``).
        """
        with self._blocking_lock:
            if self._blocking is None:
                if self._closed:
                    raise HedgefsError("the hedgefs client is closed")
                self._blocking_channel = tls.channel(self.namenode, self.credential, NAMENODE_NAME, GRPC_OPTIONS)
                self._blocking = hedgefs_pb2_grpc.NameNodeStub(self._blocking_channel)
            stub = self._blocking
        try:
            return getattr(stub, method)(request, timeout=NAMENODE_TIMEOUT_S)
        except grpc.RpcError as err:
            refusal = None
            if err.code() == grpc.StatusCode.UNAVAILABLE:   # as in _rpc: TLS refused us, or it is down?
                refusal = tls.diagnose(self.namenode, self.credential, NAMENODE_NAME, "the NameNode")
            raise from_namenode_error(err, self.namenode, refusal) from None

    def close(self) -> None:
        async def flush_reports():
            if self._reports:
                await asyncio.wait(set(self._reports), timeout=NAMENODE_TIMEOUT_S)

        try:
            self._call(flush_reports())   # a bad unit reported by the last read still gets there
        except HedgefsError:
            pass  # already closed

        async def shutdown():
            await self.datanodes.close()
            await self._nn_channel.close()

        self._loop.close(shutdown)
        with self._blocking_lock:
            self._closed = True
            if self._blocking is not None:
                self._blocking_channel.close()
                self._blocking = None

    def __enter__(self) -> "FileSystem":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ namespace

    def stat(self, path: str) -> FileStatus:
        return FileStatus.from_proto(self.rpc("GetFileInfo", pb.PathRequest(path=path)))

    def list(self, path: str, recursive: bool = False) -> list[FileStatus]:
        return list(self.iter_list(path, recursive))

    def iter_list(self, path: str, recursive: bool = False) -> Iterator[FileStatus]:
        """The entries of a listing as the NameNode pages them (a page is one call: a listing of
        any size never sits whole in the NameNode or here). Not a snapshot: see ListRequest."""
        after = ""
        while True:
            response = self.rpc("List", pb.ListRequest(path=path, recursive=recursive, start_after=after))
            for entry in response.entries:
                yield FileStatus.from_proto(entry)
            if not response.more or not response.entries:
                return
            after = response.entries[-1].path

    def mkdir(self, path: str, parents: bool = False) -> None:
        self.rpc("Mkdir", pb.MkdirRequest(path=path, parents=parents))

    def delete(self, path: str, recursive: bool = False) -> None:
        self.rpc("Delete", pb.DeleteRequest(path=path, recursive=recursive))

    def rename(self, src: str, dst: str) -> None:
        self.rpc("Rename", pb.RenameRequest(src=src, dst=dst))

    def concat(self, target: str, sources: "list[str]", overwrite: bool = False) -> None:
        """Make the complete files ``sources`` one file at ``target``, atomically, without copying:
        every source but the last must end on a block group boundary (see the NameNode)."""
        self.rpc("Concat", pb.ConcatRequest(target=target, sources=sources, overwrite=overwrite))

    def set_permission(self, path: str, mode: int) -> None:
        self.rpc("SetPermission", pb.SetPermissionRequest(path=path, permission=mode))

    def set_owner(self, path: str, owner: str = "", group: str = "") -> None:
        self.rpc("SetOwner", pb.SetOwnerRequest(path=path, owner=owner, group=group))

    def set_policy(self, path: str, policy: str) -> None:
        self.rpc("SetPolicy", pb.SetPolicyRequest(path=path, policy=policy))

    def get_policy(self, path: str) -> pb.PolicyResponse:
        return self.rpc("GetPolicy", pb.PathRequest(path=path))

    # ------------------------------------------------------------------ write

    def write(self, path: str, source: BinaryIO, overwrite: bool = False, policy: str | None = None,
              progress: Callable[[int], None] | None = None, block_size: int = 0) -> int:
        """Store everything `source` yields at `path`; visible only once complete. Returns the length.
        ``block_size`` 0 = the NameNode's default for the policy. ``progress(n)`` runs on this
        thread, never on the I/O thread: a callback that blocks (a stalled terminal) holds up
        nothing but itself, and gets the bytes written meanwhile in one call."""
        # Imported here, like the checksum below: `hedgefs cat` starts faster without them.
        from hedgefs.client.writer import StripedWriter

        writer = StripedWriter(self.datanodes, self._rpc)
        return self._write(lambda relay: writer.write_file(path, source.read, overwrite=overwrite, policy_name=policy,
                                                           progress=relay, block_size=block_size), progress)

    def _write(self, start: Callable[[Callable[[int], None]], Awaitable[int]],
               progress: Callable[[int], None] | None) -> int:
        """Run a write on the I/O thread while this thread calls ``progress`` with what it reports."""
        relay = _ProgressRelay()
        future = self._submit(start(relay.add))
        future.add_done_callback(lambda _f: relay.close())
        try:
            relay.deliver(progress)
            return future.result()
        except BaseException:
            future.cancel()   # interrupted (or the callback failed): the write is abandoned, not left running
            raise

    def write_bytes(self, path: str, data: bytes, overwrite: bool = False, policy: str | None = None) -> int:
        return self.write(path, io.BytesIO(data), overwrite=overwrite, policy=policy)

    def convert(self, path: str, policy: str, progress: Callable[[int], None] | None = None) -> int:
        """Rewrite the file at ``path`` in ``policy`` (EC <-> replication included), atomically:
        the new layout is written as an invisible file that replaces the old one in one NameNode
        transaction, and only if the old one is still the version read. Readers see the old file
        or the new one, never a mix (one holding the old layout carries on with the new: see
        FileReader._read); a crash or a failure leaves the old one. Returns the bytes rewritten.

        The NameNode refuses a file already in ``policy`` (UsageError) and one that changed
        meanwhile (HedgefsError)."""
        from hedgefs.client.writer import StripedWriter

        with self.open(path) as f:
            chunks = f.chunks()
            pending = bytearray()

            def read(n: int) -> bytes:
                # Called in the writer's source thread, which may block on our reads.
                while len(pending) < n:
                    chunk = next(chunks, None)
                    if chunk is None:
                        break
                    pending.extend(chunk)
                out = bytes(pending[:n])
                del pending[:n]
                return out

            version = pb.FileVersion(length=f.length, mtime_ms=f.status.mtime_ms)
            writer = StripedWriter(self.datanodes, self._rpc)
            try:
                return self._write(lambda relay: writer.write_file(path, read, overwrite=True, policy_name=policy,
                                                                   progress=relay, convert_from=version), progress)
            finally:
                try:
                    chunks.close()   # cancels the reads still in flight
                except ValueError:
                    pass   # the writer's source thread is still inside it: it stops at its next read

    # ------------------------------------------------------------------ read

    def open(self, path: str) -> "FileReader":
        status = self.stat(path)
        if status.is_dir:
            raise IsADirectory(f"is a directory: {path}")
        return FileReader(self, status)

    def read_bytes(self, path: str) -> bytes:
        with self.open(path) as f:
            return f.pread(0, f.length)

    def checksum(self, path: str) -> "FileChecksum":
        """The file's COMPOSITE-CRC32C (client/checksum.py): the same for any layout of the same
        bytes, combined from the DataNodes' stored chunk CRCs without moving data where it can."""
        with self.open(path) as f:
            return f.checksum()

    def stats(self) -> ReadStats:
        stats = self.metrics.snapshot(breaker_trips=self.breaker.trips)
        slow = self.model.slow_datanodes()
        for dn, row in stats.per_datanode.items():
            row["slow"] = dn in slow
        return stats

    async def _stat(self, path: str) -> FileStatus:
        return FileStatus.from_proto(await self._rpc("GetFileInfo", pb.PathRequest(path=path)))

    async def _pread(self, status: FileStatus, offset: int, length: int,
                     avoid: frozenset[str] = frozenset(), into: bytearray | None = None) -> bytearray | memoryview:
        """The bytes [offset, offset+length): a new bytearray, or a view of ``into`` filled with them."""
        self.metrics.incr("reads")
        policy = parse_policy(status.policy)
        out = bytearray(length) if into is None else into
        view = memoryview(out)[:length]
        pieces = layout.file_range_to_groups(offset, length, policy, status.block_size, status.length)
        await gather_or_cancel(
            self._reader.read_group_range(
                policy, status.groups[p.group_index], p.offset_in_group, p.length,
                view[p.offset_in_file - offset:p.offset_in_file - offset + p.length], avoid)
            for p in pieces
        )
        return out if into is None else view


class _ProgressRelay:
    """Bytes written, handed from the event loop to the caller's thread: the loop only adds to
    a counter, so the unit streams never wait on a progress bar."""

    def __init__(self):
        self._cond = threading.Condition()
        self._pending = 0
        self._closed = False

    def add(self, n: int) -> None:
        with self._cond:
            self._pending += n
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()

    def deliver(self, callback: Callable[[int], None] | None) -> None:
        """Call ``callback`` with what was written since its last call, until ``close``."""
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._closed)
                n, self._pending, closed = self._pending, 0, self._closed
            if n and callback is not None:
                callback(n)
            if closed:
                return


def _new_locations(cached: FileStatus, fresh: FileStatus) -> bool:
    """Does `fresh` (the same file: the same block groups) put some unit somewhere `cached` did not?"""
    if [g.id for g in fresh.groups] != [g.id for g in cached.groups]:
        return False  # another file now has this path
    return any(loc != old.units.get(i) for new, old in zip(fresh.groups, cached.groups) for i, loc in new.units.items())


def _converted(cached: FileStatus, fresh: FileStatus) -> bool:
    """Is `fresh` the bytes of `cached` in another policy (``ec convert``)? A conversion keeps the
    mtime, and every other replacement of a file gets a later one (the NameNode sees to it)."""
    return (fresh.policy != cached.policy and not fresh.is_dir and
            (fresh.length, fresh.mtime_ms) == (cached.length, cached.mtime_ms))


class FileReader:
    """An open file: positional reads, and sequential chunks with read-ahead."""

    def __init__(self, fs: FileSystem, status: FileStatus):
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

    def submit(self, offset: int, length: int, avoid: frozenset[str] = frozenset()) -> "concurrent.futures.Future":
        """Start a positional read; the Future's ``cancel()`` stops it and its unit reads.
        Units on DataNodes in ``avoid`` are rebuilt from other units where possible."""
        if offset < 0 or length < 0:
            raise ValueError("offset and length must be >= 0")
        length = max(0, min(length, self.length - offset))
        return self._fs._submit(self._read(offset, length, avoid))

    async def _read(self, offset: int, length: int, avoid: frozenset[str] = frozenset(),
                    into: bytearray | None = None) -> bytearray | memoryview:
        """Read with the cached unit locations; if too few units answer, locate again.

        Units move (repair onto a spare, a DataNode restarted on a new port); the file's block
        groups do not, so fresh locations for the same groups are safe to retry with. A file
        converted to another policy meanwhile has new groups holding the same bytes: the whole
        range is read again from them, never a mix of the two layouts. Block tokens expire: they
        are renewed before they do, and once more after a failed read.
        """
        self._maybe_relocate()
        for attempt in range(_RELOCATIONS + 1):
            status = self.status
            if status.renew_tokens_at and time.monotonic() >= status.renew_tokens_at:
                status = await self._renew(status)
            try:
                return await self._fs._pread(status, offset, length, avoid, into)
            except DataUnavailable:
                if attempt == _RELOCATIONS:
                    raise
                try:
                    fresh = await self._fs._stat(status.path)
                except NotFound:
                    raise DataUnavailable(f"{status.path} was deleted while being read") from None
                converted = _converted(status, fresh)
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
        """DataUnavailable if a block group has fewer live units than a read needs (k, or one
        replica), as the NameNode sees it: a caller checks before writing out any byte, so a file
        known to be unreadable gives a clean error and no partial output."""
        policy = parse_policy(self.status.policy)
        for g in self.status.groups:
            if len(g.units) < policy.k:
                where = (f"block {g.id} has no live replica (of {policy.units})" if policy.replicated else
                         f"block group {g.id} has {len(g.units)} live units, {policy.k} needed")
                raise DataUnavailable(f"data unavailable: {self.status.path}: {where}")

    async def _renew(self, status: FileStatus) -> FileStatus:
        """Fresh locations and tokens for the same file (reads in flight share one renewal)."""
        if self._renewing is None or self._renewing.done():
            async def renew() -> FileStatus:
                fresh = await self._fs._stat(status.path)
                if [g.id for g in fresh.groups] == [g.id for g in status.groups]:
                    self.status = fresh
                    self._fs.metrics.incr("token_refreshes")
                return self.status
            self._renewing = asyncio.ensure_future(renew())
        return await asyncio.shield(self._renewing)

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
