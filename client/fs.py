"""The client library's API: a FileSystem over the NameNode and DataNodes.

The public methods are ordinary blocking calls, safe to use from several threads at once; the
network I/O behind them runs on one private event loop (loop.py). Writes are the writer's job
(writer.py), reads an open file's (file_reader.py, over the hedged reader: reader.py); this
module is the NameNode's calls and what every read and write shares (the latency model, the
breaker, the data transfer client).

A secure cluster: given a credential (``credentials``, else the file ``HEDGEFS_CREDENTIALS``
names), every channel is TLS with it and the block tokens that come with unit locations go with
every unit read and write. Tokens expire: an open file renews its locations (and tokens) when
three quarters of their lifetime have passed, and once more if a read fails anyway, so a long
``cat`` or benchmark never notices. A connection TLS refuses is explained (``tls.diagnose``) and
is a NotAllowed error (exit 4), not "unreachable".

An HA cluster's NameNodes are a list (``nn1:8020,nn2:8020``): every NameNode call goes through
``NameNodes`` (namenodes.py), which follows the active and fails over. Reads of an open file need
only the DataNodes; renewing its tokens or locations goes through the same calls.
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

from hedgefs.client.admin import Admin
from hedgefs.client.batched import BatchedCalls
from hedgefs.client.config import DEFAULT_NAMENODE, FailoverConfig, HedgeConfig, namenode_address  # noqa: F401
from hedgefs.client.errors import (
    DataUnavailable,
    FileChanged,
    HedgefsError,
    IsADirectory,
    NotFound,
    UsageError,
)
from hedgefs.client.file_reader import FileReader, ReadServices
from hedgefs.client.latency import LatencyModel
from hedgefs.client.loop import LoopThread
from hedgefs.client.namenodes import NAMENODE_TIMEOUT_S, NameNodes
from hedgefs.client.metrics import ClientMetrics, ReadStats, breaker_tripped, watch_breaker
from hedgefs.client.locations import FileStatus, GroupLocation, UnitLocation, stat_request
from hedgefs.client.reader import HedgedReader, make_breaker
from hedgefs.client.transport import DataNodeClient, TransferError
from hedgefs.proto import MAX_XATTR_SIZE  # noqa: F401  (set_xattr's bound, for the gateways)
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.security import tls
from hedgefs.security.identity import Credential, CredentialError

if TYPE_CHECKING:
    from hedgefs.client.checksum import FileChecksum
    from hedgefs.client.file_writer import FileWriter


log = logging.getLogger("hedgefs.client.fs")


FROM_ENVIRONMENT = "$HEDGEFS_CREDENTIALS"
MAX_LINKS = 40   # symbolic links followed in a row (Linux's MAXSYMLINKS)


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


class FileSystem:
    def __init__(self, namenode: str | None = None, hedge: HedgeConfig | None = None,
                 credentials: "str | Credential | None" = FROM_ENVIRONMENT, failover: FailoverConfig | None = None):
        self.credential = credentials_from(credentials)
        # Every NameNode call goes through it (a list of NameNodes: failover; namenodes.py).
        self.namenodes = NameNodes(namenode_address(namenode), self.credential, failover)
        self.namenode = ",".join(self.namenodes.addresses)
        self.hedge = hedge or HedgeConfig.from_sources()
        self.metrics = ClientMetrics()
        self.model = LatencyModel()   # per-DataNode latency: thresholds, who is slow or silent
        self.breaker = make_breaker(self.hedge, self.model, on_trip=breaker_tripped)
        watch_breaker(self.breaker)
        self._loop = LoopThread()
        self.admin = Admin(self.namenodes)   # report, fsck, safe mode, decommission, credentials, failover
        # The batched namespace calls; stats of many threads go together (batched.py).
        self.batched = BatchedCalls(self.namenodes, self._located)
        self._call(self._init_channels())

    async def _init_channels(self) -> None:
        self.datanodes = DataNodeClient(tls=tls.client_context(self.credential) if self.credential else None)
        hedged = HedgedReader(self.datanodes, self.hedge, self.breaker, self.metrics, self.model, self._report_bad)
        # What every file this FileSystem opens reads through (file_reader.py).
        self.read_services = ReadServices(self._loop, hedged, self._locate, self.metrics, self.model, self.datanodes)
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

    async def _rpc(self, method: str, request, deadline: float | None = None):
        """Call a NameNode method on the client's event loop (namenodes.py: failover, retry ids;
        ``deadline``: no try starts after it, not the failover deadline from now)."""
        return await self.namenodes.call_async(method, request, deadline)

    def call_soon(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the client's I/O thread as soon as it is free: how late it runs is
        how busy that thread is (``hedgefs bench read`` samples it)."""
        self._loop.call_soon(callback)

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
            await self.namenodes.close_async()

        self._loop.close(shutdown)
        self.namenodes.close()

    def __enter__(self) -> "FileSystem":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ namespace

    def stat(self, path: str, span: tuple[int, int] | None = None, xattrs: bool = False) -> FileStatus:
        """The status of ``path``; a file's with the locations of its block groups. ``span``
        (start, end): only the groups holding bytes [start, end) (HDFS's getBlockLocations of a
        range: whether a cached open file is still this version, for a few bytes of a huge file,
        without listing its thousands of groups); ``FileStatus.ranged`` says so, and
        ``first_group`` which group comes first. A ranged status is not opened for reading.
        ``xattrs``: with the file's extended attributes (``FileStatus.xattrs``), read in the same
        lookup: those of the version described (an S3 object's metadata and its bytes)."""
        if span is None:
            return self.batched.stat(path, xattrs)   # with other threads' stats, when there are any
        request = stat_request(path, xattrs)
        start, end = span
        if start < 0 or end < start:
            raise UsageError(f"bad span {span!r}: (start, end) with 0 <= start <= end")
        request.range_offset, request.range_length = start, end - start
        return self._located(self.namenodes.call("GetFileInfo", request), xattrs)

    # Many operations of one kind in one NameNode call (HDFS has none; a long-lived process
    # saves a call per item). Each returns, per path, its answer or the HedgefsError its single
    # call would have raised: one bad path fails alone, and names itself.

    def stat_many(self, paths: "list[str]", xattrs: bool = False) -> "list[FileStatus | HedgefsError]":
        return self.batched.stat_many(list(paths), xattrs)

    def mkdirs(self, paths: "list[str]", parents: bool = True) -> "list[HedgefsError | None]":
        return self.batched.mkdirs(list(paths), parents)

    def delete_many(self, paths: "list[str]", recursive: bool = False) -> "list[HedgefsError | None]":
        return self.batched.delete_many(list(paths), recursive)

    def create_empty(self, paths: "list[str]", overwrite: bool = False,
                     policy: str | None = None) -> "list[HedgefsError | None]":
        """Empty files at ``paths``, each complete (visible) at once: one call for them all."""
        return self.batched.create_empty(list(paths), overwrite, policy or "")

    def _located(self, info: pb.FileInfo, xattrs: bool = False) -> FileStatus:
        """A file's status; the cluster's view of its DataNodes seeds the latency model."""
        status = FileStatus.from_proto(info, xattrs)
        if status.datanode_reads and self.hedge.adaptive and self.hedge.cluster_view:
            self.model.seed(status.datanode_reads)
        return status

    def list(self, path: str, recursive: bool = False) -> list[FileStatus]:
        return list(self.iter_list(path, recursive))

    def iter_list(self, path: str, recursive: bool = False, xattrs: bool = False,
                  limit: int | None = None) -> Iterator[FileStatus]:
        """The entries of a listing as the NameNode pages them (a page is one call: a listing of
        any size never sits whole in the NameNode or here). Not a snapshot: see ListRequest.
        ``xattrs``: each file the caller may read with its extended attributes (FileStatus.xattrs).
        ``limit``: at most that many entries (each page asks for no more than are left)."""
        after, left = "", limit
        while left is None or left > 0:
            response = self.namenodes.call("List", pb.ListRequest(path=path, recursive=recursive, start_after=after,
                                                                  xattrs=xattrs, limit=left or 0))
            for entry in response.entries[:left]:
                yield FileStatus.from_proto(entry, xattrs)
            if left is not None:
                left -= len(response.entries)
            if not response.more or not response.entries:
                return
            after = response.entries[-1].path

    def mkdir(self, path: str, parents: bool = False, permission: int | None = None) -> FileStatus:
        """The directory at ``path``: made (mode ``permission``, 0..0o1777; default 0o755; ancestors
        made with ``parents`` get 0o755), or there already with ``parents``. Its status, as the
        NameNode answered the mkdir (one call: no stat needed after it)."""
        return self.batched.mkdir(path, parents, permission)   # with other threads' mkdirs, when there are any

    def delete(self, path: str, recursive: bool = False) -> None:
        self.batched.delete(path, recursive)   # with other threads' deletes, when there are any

    def rename(self, src: str, dst: str) -> None:
        self.namenodes.call("Rename", pb.RenameRequest(src=src, dst=dst))

    def concat(self, target: str, sources: "list[str]", overwrite: bool = False) -> None:
        """Make the complete files ``sources`` one file at ``target``, atomically, without copying:
        every source but the last must end on a block group boundary (see the NameNode)."""
        self.namenodes.call("Concat", pb.ConcatRequest(target=target, sources=sources, overwrite=overwrite))

    def set_permission(self, path: str, mode: int) -> None:
        self.namenodes.call("SetPermission", pb.SetPermissionRequest(path=path, permission=mode))

    def set_owner(self, path: str, owner: str = "", group: str = "") -> None:
        self.namenodes.call("SetOwner", pb.SetOwnerRequest(path=path, owner=owner, group=group))

    def set_policy(self, path: str, policy: str) -> None:
        self.namenodes.call("SetPolicy", pb.SetPolicyRequest(path=path, policy=policy))

    def set_times(self, path: str, mtime_ms: int | None = None, atime_ms: int | None = None) -> None:
        """HDFS's setTimes (utimes): ms since the epoch; None leaves that time as it is."""
        self.namenodes.call("SetTimes", pb.SetTimesRequest(path=path, mtime_ms=-1 if mtime_ms is None else mtime_ms,
                                                atime_ms=-1 if atime_ms is None else atime_ms))

    def symlink(self, target: str, path: str) -> None:
        """A symbolic link at ``path`` to ``target`` (``ln -s target path``), kept as given: ``open``
        follows it, ``stat`` does not (its ``symlink`` is the target)."""
        self.namenodes.call("CreateSymlink", pb.SymlinkRequest(target=target, path=path))

    def readlink(self, path: str) -> str:
        status = self.stat(path)
        if not status.is_link:
            raise UsageError(f"not a symbolic link: {path}")
        return status.symlink

    def resolve(self, path: str) -> str:
        """``path`` with the symbolic links it ends in followed (up to 40, as Linux), relative
        targets from the link's directory. (Links inside a path are not followed: the
        NameNode answers "not a directory".)"""
        import posixpath

        for _ in range(MAX_LINKS):
            status = self.stat(path)
            if not status.is_link:
                return path
            path = posixpath.normpath(posixpath.join(posixpath.dirname(path), status.symlink))
        raise UsageError(f"too many levels of symbolic links: {path}")

    def get_xattrs(self, path: str) -> dict[str, bytes]:
        """Every extended attribute of ``path`` (``user.NAME``: the only namespace kept)."""
        return dict(self.namenodes.call("GetXAttrs", pb.PathRequest(path=path)).xattrs)

    def get_xattr(self, path: str, name: str) -> bytes:
        value = self.get_xattrs(path).get(name)
        if value is None:
            raise NotFound(f"no extended attribute {name} on {path}")
        return value

    def set_xattr(self, path: str, name: str, value: bytes, flags: int = 0) -> None:
        """``flags``: XATTR_CREATE (1: fails if it exists), XATTR_REPLACE (2: fails if it does not).
        The name and value are at most MAX_XATTR_SIZE bytes together (the NameNode refuses more)."""
        self.namenodes.call("SetXAttr", pb.SetXAttrRequest(path=path, name=name, value=bytes(value), flags=flags))

    def remove_xattr(self, path: str, name: str) -> None:
        self.namenodes.call("RemoveXAttr", pb.RemoveXAttrRequest(path=path, name=name))

    def get_policy(self, path: str) -> "PolicyInfo":
        """The policy new files under ``path`` get, and where it comes from."""
        r = self.namenodes.call("GetPolicy", pb.PathRequest(path=path))
        return PolicyInfo(r.policy, r.source_path, r.default_block_size)

    # ------------------------------------------------------------------ write

    def create(self, path: str, overwrite: bool = False, policy: str | None = None, block_size: int = 0,
               digests: "tuple[str, ...]" = ()) -> "FileWriter":
        """A new file at ``path`` to ``write`` into, push-style; ``close`` commits it (file_writer.py).
        The NameNode's refusals (exists, a directory, no such parent, not allowed) are raised here.
        ``block_size`` 0 = the NameNode's default for the policy; ``digests``: hashlib names to
        hash the bytes with as they pass (``FileWriter.hexdigest``)."""
        from hedgefs.client.file_writer import FileWriter
        from hedgefs.client.writer import StripedWriter

        writer = StripedWriter(self.datanodes, self._rpc)
        created = self._call(writer.create(path, overwrite=overwrite, policy_name=policy, block_size=block_size))
        return FileWriter(self._loop, writer, created, path, digests, reread=self._rereader(path))

    def append(self, path: str, digests: "tuple[str, ...]" = (), rewrite_from: int | None = None) -> "FileWriter":
        """The complete file at ``path``, open for appending (HDFS's append): ``write`` adds bytes
        at its end, ``close`` commits the new version; until then readers see the file as it was,
        and an abort (or a crash: the lease expires) leaves it so. Copy-on-write: the file's full
        block groups are kept as they are, its last, partial one is rewritten (read and written
        again with the new bytes after it) into a new group. Refusals here: no such file, a
        directory, a symbolic link, not allowed, another client writing it (AlreadyExists).
        ``FileWriter.start`` is the length it had.

        ``rewrite_from`` (at most the file's length): a write in place: the bytes written replace
        the file's from that offset on (the new version ends where they end); the groups before
        the one it falls in are kept, that one and those after it are written anew."""
        from hedgefs.client.file_writer import FileWriter

        writer, created, start, kept_length, prefix, done = self._reopen(path, rewrite_from)
        return FileWriter(self._loop, writer, created, path, digests, start=start, kept_length=kept_length,
                          prefix=prefix, done=done, reread=self._rereader(path))

    def _reopen(self, path: str, rewrite_from: int | None = None) -> tuple:
        """An append's (or a write in place's) start: the NameNode's Append, and the file's bytes
        to write again; (writer, created, start, kept_length, prefix, done) for a FileWriter."""
        from hedgefs.client.writer import StripedWriter

        writer = StripedWriter(self.datanodes, self._rpc)
        reopened = self._call(writer.reopen(path, rewrite_from=rewrite_from))
        start = reopened.length if rewrite_from is None else rewrite_from
        prefix, done = self._old_bytes(writer, path, reopened, start)
        return writer, reopened.write, start, reopened.kept_length, prefix, done

    def _rereader(self, path: str) -> Callable[..., tuple]:
        """A FileWriter's ``reread``: (read, done) of bytes [kept_length, end) of the version a
        Sync made (``_old_bytes``)."""
        return lambda writer, reopened, end: self._old_bytes(writer, path, reopened, end)

    def recover_lease(self, path: str) -> bool:
        """HDFS's recoverLease: abandon the write in progress at ``path`` now (a crashed writer's,
        whose lease would expire later), leaving the file at its last committed version (every
        byte an hflush committed). True if there was one."""
        return self.namenodes.call("RecoverLease", pb.PathRequest(path=path)).recovered

    def truncate(self, path: str, length: int) -> None:
        """HDFS's truncate: the file at ``path`` keeps its first ``length`` bytes (at most its
        length: UsageError past the end, nothing changed). A cut on a block group boundary is
        one NameNode call; elsewhere the group it falls in is rewritten copy-on-write (its first
        bytes read and written into a new group), and the new version replaces the file at once
        when that is durable. Readers see the old file or the new one, never a mix."""
        from hedgefs.client.writer import StripedWriter

        if length < 0:
            raise UsageError(f"cannot truncate {path} to {length} bytes")
        writer = StripedWriter(self.datanodes, self._rpc)
        reopened = self._call(writer.reopen(path, truncate_to=length))
        if reopened is None:
            return
        prefix, done = self._old_bytes(writer, path, reopened, length)
        try:
            self._call(writer.write_created(reopened.write, prefix, lambda _n: None,
                                            kept_length=reopened.kept_length))
        finally:
            done()

    def _old_bytes(self, writer, path: str, reopened: pb.AppendResponse, end: int):
        """(read, close) of the bytes [kept_length, end) of the version the NameNode reopened
        (the last group's, to be written again); that version changed: FileChanged, the write
        abandoned."""
        if end <= reopened.kept_length:
            return (lambda n: b""), (lambda: None)
        try:
            reader = self.open(path)
            if (reader.length, reader.status.mtime_ms) != (reopened.length, reopened.mtime_ms):
                raise FileChanged(f"{path} changed while being reopened for writing")
            stream = reader.stream(reopened.kept_length, end)
        except BaseException:
            self._call(writer._abandon(reopened.write.file_id))
            raise
        return stream.read, stream.close

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
        if not data:   # an empty file: one NameNode call (no lease, no Complete), with other threads'
            self.batched.create_one_empty(path, overwrite, policy or "")
            return 0
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

        with self.open(path) as f, f.stream() as source:   # read in the writer's source thread
            version = pb.FileVersion(length=f.length, mtime_ms=f.status.mtime_ms)
            writer = StripedWriter(self.datanodes, self._rpc)
            return self._write(lambda relay: writer.write_file(path, source.read, overwrite=True, policy_name=policy,
                                                               progress=relay, convert_from=version), progress)

    # ------------------------------------------------------------------ read

    def open(self, path: "str | FileStatus") -> "FileReader":
        """An open file at ``path``, or of a status ``stat`` gave (no second NameNode call: a
        gateway that checked the version opens that version)."""
        pinned = isinstance(path, FileStatus)
        status = path if pinned else self.stat(path)
        if status.is_link:
            status, pinned = self.stat(self.resolve(status.path)), False
        if status.ranged:
            raise UsageError(f"{status.path}: a status of a span of the file cannot be opened (stat it whole)")
        if status.is_dir:
            raise IsADirectory(f"is a directory: {status.path}")
        return FileReader(self.read_services, self._readable(status, pinned))

    def _readable(self, status: FileStatus, pinned: bool) -> FileStatus:
        """``status``, or a later one of the file once the NameNode no longer marks its locations
        pending (``_locate``). ``pinned`` (the caller gave the status: a gateway that checked a
        version reads that version or nothing): the file replaced meanwhile is FileChanged. Opened
        by path, whatever the path holds after the wait is the answer (a ``tail -f`` of a file
        appended to meanwhile follows it, a ``cat`` reads the new version)."""
        if not status.locations_pending:
            return status
        fresh = self._call(self._locate(status.path))
        if not pinned:
            if fresh.is_dir:
                raise IsADirectory(f"is a directory: {status.path}")
            if fresh.is_link:   # (replaced by a link meanwhile: what it points at, from the top)
                return self._readable(self.stat(self.resolve(fresh.path)), False)
            return fresh
        if fresh.is_dir or [g.id for g in fresh.groups] != [g.id for g in status.groups]:
            raise FileChanged(f"{status.path}: the file changed while it was opened (it was replaced)")
        return fresh

    def read_bytes(self, path: str) -> bytes:
        with self.open(path) as f:
            return f.pread(0, f.length)

    def checksum(self, path: str) -> "FileChecksum":
        """The file's COMPOSITE-CRC32C (client/checksum.py): the same for any layout of the same
        bytes, combined from the DataNodes' stored chunk CRCs without moving data where it can."""
        with self.open(path) as f:
            return f.checksum()

    def observe_reads(self, observer) -> "Callable[[], None]":
        """Call ``observer(report)`` (a ``range_fetch.FetchReport``) as each range fetch of a read
        ends, on the client's event loop; returns the call that stops it (reader.py ``observe``)."""
        return self.read_services.hedged.observe(observer)

    def stats(self) -> ReadStats:
        stats = self.metrics.snapshot(breaker_trips=self.breaker.trips)
        slow = self.model.slow_datanodes()
        for dn, row in stats.per_datanode.items():
            row["slow"] = dn in slow
        return stats

    async def _locate(self, path: str) -> FileStatus:
        """``stat`` on the client's event loop: an open file's locator (file_reader.py). While the
        NameNode marks the locations pending (it just started or was promoted, and awaits the
        block reports that locate a group short of k units) it asks again, with the NameNode
        calls' pause, up to their failover deadline; after it, the NameNode's one line (naming
        the DataNodes awaited). A stat does not wait: only a reader needs the locations.

        One deadline bounds the whole lookup, the failover of each call in it included: no try
        starts after it (each call may try until what is left, and at least ``backoff_max_s``
        more), and a try started has a call's usual timeout, so a NameNode slow to answer the last
        one is heard. The lookup ends by the deadline plus one try, not twice the deadline."""
        config, clock = self.namenodes.config, self.namenodes.clock
        deadline, pause = clock() + config.deadline_s, config.backoff_start_s
        request = stat_request(path)
        while True:
            call_deadline = max(deadline, clock() + config.backoff_max_s)
            status = self._located(await self._rpc("GetFileInfo", request, call_deadline))
            left = deadline - clock()
            if not status.locations_pending:
                return status
            if left <= 0:
                raise DataUnavailable(status.locations_pending)   # S3: 503, as a read that cannot be had
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, config.backoff_max_s)


@dataclasses.dataclass(frozen=True)
class PolicyInfo:
    policy: str
    source_path: str          # the directory it is inherited from ("": the cluster's default)
    default_block_size: int   # the NameNode's default block size (before rounding to a policy's cell)


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
