"""The client library: a FileSystem-style API over the NameNode and DataNodes.

All network I/O runs on one private asyncio event loop (a daemon thread), so many cell reads
can be in flight and raced without a thread each; the public methods are ordinary blocking
calls and safe to use from several threads at once.
"""

import asyncio
import concurrent.futures
import dataclasses
import logging
import os
import threading
from typing import BinaryIO, Callable, Iterator

import grpc

from hedgefs.client.breaker import CircuitBreaker
from hedgefs.client.config import HedgeConfig
from hedgefs.client.datanode_client import DataNodeClient
from hedgefs.client.errors import DataUnavailable, HedgefsError, IsADirectory, Unavailable, from_namenode_error
from hedgefs.client.metrics import ClientMetrics, ReadStats
from hedgefs.client.reader import GroupLocation, HedgedReader, UnitLocation, gather_or_cancel
from hedgefs.client.writer import StripedWriter, StripeSource
from hedgefs.ec import layout
from hedgefs.ec.policy import parse_policy
from hedgefs.proto import GRPC_OPTIONS, hedgefs_pb2_grpc
from hedgefs.proto import hedgefs_pb2 as pb

DEFAULT_NAMENODE = "127.0.0.1:8020"
NAMENODE_TIMEOUT_S = 10.0
_COMPLETE_ATTEMPTS = 4  # 0.5 + 1 + 2 s of back-off: rides out a NameNode restart

log = logging.getLogger("hedgefs.client.fs")


def namenode_address(explicit: str | None = None) -> str:
    return explicit or os.environ.get("HEDGEFS_NAMENODE") or DEFAULT_NAMENODE


@dataclasses.dataclass(frozen=True)
class FileStatus:
    path: str
    is_dir: bool
    length: int
    policy: str
    block_size: int
    mtime_ms: int
    groups: tuple[GroupLocation, ...] = ()

    @classmethod
    def from_proto(cls, info: pb.FileInfo) -> "FileStatus":
        groups = tuple(
            GroupLocation(
                id=g.id,
                length=g.length,
                units={u.index: UnitLocation(u.index, u.datanode_id, u.address) for u in g.units},
            )
            for g in info.groups
        )
        return cls(info.path, info.is_dir, info.length, info.policy, info.block_size, info.mtime_ms, groups)


class FileSystem:
    def __init__(self, namenode: str | None = None, hedge: HedgeConfig | None = None):
        self.namenode = namenode_address(namenode)
        self.hedge = hedge or HedgeConfig.from_sources()
        self.metrics = ClientMetrics()
        self.breaker = CircuitBreaker(self.hedge)
        self._lifecycle = threading.Lock()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="hedgefs-client", daemon=True)
        self._thread.start()
        self._call(self._init_channels())

    async def _init_channels(self) -> None:
        self._nn_channel = grpc.aio.insecure_channel(self.namenode, options=GRPC_OPTIONS)
        self._nn = hedgefs_pb2_grpc.NameNodeStub(self._nn_channel)
        self.datanodes = DataNodeClient()
        self._reader = HedgedReader(self.datanodes, self.hedge, self.breaker, self.metrics)
        self._writer = StripedWriter(self.datanodes)

    # ------------------------------------------------------------------ plumbing

    def _call(self, coro):
        return self._submit(coro).result()

    def _submit(self, coro) -> "concurrent.futures.Future":
        with self._lifecycle:
            if self._closed:
                coro.close()
                raise HedgefsError("the hedgefs client is closed")
            return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _rpc(self, method: str, request):
        try:
            return await getattr(self._nn, method)(request, timeout=NAMENODE_TIMEOUT_S)
        except grpc.RpcError as err:
            raise from_namenode_error(err, self.namenode) from None

    def rpc(self, method: str, request):
        """Call a NameNode method by name (blocking); errors become HedgefsError."""
        return self._call(self._rpc(method, request))

    def close(self) -> None:
        with self._lifecycle:
            if self._closed:
                return
            self._closed = True

        async def shutdown():
            # Reads abandoned by an error (or a caller that went away) still have cell reads in
            # flight; cancel them so they end here, not as warnings when the loop is destroyed.
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)
            await self.datanodes.close()
            await self._nn_channel.close()

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    def __enter__(self) -> "FileSystem":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ namespace

    def stat(self, path: str) -> FileStatus:
        return FileStatus.from_proto(self.rpc("GetFileInfo", pb.PathRequest(path=path)))

    def list(self, path: str, recursive: bool = False) -> list[FileStatus]:
        response = self.rpc("List", pb.ListRequest(path=path, recursive=recursive))
        return [FileStatus.from_proto(e) for e in response.entries]

    def mkdir(self, path: str, parents: bool = False) -> None:
        self.rpc("Mkdir", pb.MkdirRequest(path=path, parents=parents))

    def delete(self, path: str, recursive: bool = False) -> None:
        self.rpc("Delete", pb.DeleteRequest(path=path, recursive=recursive))

    def rename(self, src: str, dst: str) -> None:
        self.rpc("Rename", pb.RenameRequest(src=src, dst=dst))

    def set_policy(self, path: str, policy: str) -> None:
        self.rpc("SetPolicy", pb.SetPolicyRequest(path=path, policy=policy))

    def get_policy(self, path: str) -> pb.PolicyResponse:
        return self.rpc("GetPolicy", pb.PathRequest(path=path))

    # ------------------------------------------------------------------ write

    def write(self, path: str, source: BinaryIO, overwrite: bool = False, policy: str | None = None,
              progress: Callable[[int], None] | None = None) -> int:
        """Store everything `source` yields at `path`; visible only once complete. Returns the length."""
        return self._call(self._write(path, source.read, overwrite, policy, progress or (lambda n: None)))

    def write_bytes(self, path: str, data: bytes, overwrite: bool = False, policy: str | None = None) -> int:
        import io

        return self.write(path, io.BytesIO(data), overwrite=overwrite, policy=policy)

    async def _write(self, path, read, overwrite, policy_name, progress) -> int:
        created = await self._rpc("Create", pb.CreateRequest(
            path=path, overwrite=overwrite, policy=policy_name or "", client_name=f"pid-{os.getpid()}"))
        source = StripeSource(read)
        try:
            policy = parse_policy(created.policy)
            commits, total, failed = [], 0, set()
            data = await source.read(policy.stripe_data_size)
            while data:
                group = await self._add_block_group(created.file_id, failed)
                written = await self._writer.write_group(group, policy, created.block_size, data, source, progress)
                commits.append(pb.GroupCommit(group_id=group.id, length=written.length, stored_units=written.stored_units))
                failed.update(written.failed_datanodes)
                total += written.length
                data = written.next_stripe
            await self._complete(pb.CompleteRequest(file_id=created.file_id, length=total, groups=commits))
            return total
        except BaseException:
            try:
                await self._rpc("Abandon", pb.AbandonRequest(file_id=created.file_id))
            except HedgefsError:
                pass  # the NameNode's lease monitor cleans up what we could not
            raise
        finally:
            source.close()

    async def _add_block_group(self, file_id: int, failed: set[str]) -> pb.BlockGroup:
        """A new group, away from DataNodes that failed earlier in this write if there are enough others."""
        if failed:
            try:
                return await self._rpc("AddBlockGroup", pb.AddBlockGroupRequest(file_id=file_id, exclude_datanodes=sorted(failed)))
            except HedgefsError as err:
                log.info("placing the next group away from %s failed (%s); trying them again", sorted(failed), err)
        return await self._rpc("AddBlockGroup", pb.AddBlockGroupRequest(file_id=file_id))

    async def _complete(self, request: pb.CompleteRequest) -> None:
        """Complete, retried while the NameNode is unreachable (a repeated Complete is accepted)."""
        for attempt in range(_COMPLETE_ATTEMPTS):
            try:
                await self._rpc("Complete", request)
                return
            except Unavailable:
                if attempt == _COMPLETE_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(0.5 * 2 ** attempt)

    # ------------------------------------------------------------------ read

    def open(self, path: str) -> "FileReader":
        status = self.stat(path)
        if status.is_dir:
            raise IsADirectory(f"is a directory: {path}")
        return FileReader(self, status)

    def read_bytes(self, path: str) -> bytes:
        with self.open(path) as f:
            return f.pread(0, f.length)

    def stats(self) -> ReadStats:
        return self.metrics.snapshot(breaker_trips=self.breaker.trips)

    async def _stat(self, path: str) -> FileStatus:
        return FileStatus.from_proto(await self._rpc("GetFileInfo", pb.PathRequest(path=path)))

    async def _pread(self, status: FileStatus, offset: int, length: int) -> bytearray:
        self.metrics.incr("reads")
        policy = parse_policy(status.policy)
        out = bytearray(length)
        view = memoryview(out)
        pieces = layout.file_range_to_groups(offset, length, policy, status.block_size, status.length)
        await gather_or_cancel(
            self._reader.read_group_range(
                policy, status.groups[p.group_index], p.offset_in_group, p.length,
                view[p.offset_in_file - offset:p.offset_in_file - offset + p.length])
            for p in pieces
        )
        return out


def _new_locations(cached: FileStatus, fresh: FileStatus) -> bool:
    """Does `fresh` (the same file: the same block groups) put some unit somewhere `cached` did not?"""
    if [g.id for g in fresh.groups] != [g.id for g in cached.groups]:
        return False  # another file now has this path
    return any(loc != old.units.get(i) for new, old in zip(fresh.groups, cached.groups) for i, loc in new.units.items())


class FileReader:
    """An open file: positional reads, and sequential chunks with read-ahead."""

    def __init__(self, fs: FileSystem, status: FileStatus):
        self._fs = fs
        self.status = status
        self.length = status.length

    def pread(self, offset: int, length: int) -> bytes:
        if offset < 0 or length < 0:
            raise ValueError("offset and length must be >= 0")
        length = max(0, min(length, self.length - offset))
        return self._fs._call(self._read(offset, length))

    async def _read(self, offset: int, length: int) -> bytearray:
        """Read with the cached unit locations; if too few units answer, locate again once.

        Units move (repair onto a spare, a DataNode restarted on a new port); the file's block
        groups do not, so fresh locations for the same groups are safe to retry with.
        """
        try:
            return await self._fs._pread(self.status, offset, length)
        except DataUnavailable:
            fresh = await self._fs._stat(self.status.path)
            if not _new_locations(self.status, fresh):
                raise  # nothing moved: reading again would only wait on the same DataNodes
            self.status = fresh
            return await self._fs._pread(fresh, offset, length)

    def chunks(self, read_ahead: int = 2) -> Iterator[bytearray]:
        """The whole file in order, a few stripes per chunk, with `read_ahead` chunks in flight."""
        policy = parse_policy(self.status.policy)
        size = policy.stripe_data_size * max(1, (8 << 20) // policy.stripe_data_size)
        offsets = list(range(0, self.length, size))
        inflight: list = []
        try:
            for offset in offsets:
                inflight.append(self._fs._submit(self._read(offset, min(size, self.length - offset))))
                if len(inflight) > read_ahead:
                    yield inflight.pop(0).result()
            while inflight:
                yield inflight.pop(0).result()
        finally:
            for future in inflight:
                future.cancel()

    def close(self) -> None:
        pass

    def __enter__(self) -> "FileReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
