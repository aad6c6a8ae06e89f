"""Striped writes, the whole write path of a file: Create -> (AddBlockGroup, stream)* -> Complete.

The source is read a stripe at a time, encoded and streamed as k+m internal blocks. Per block
group: AddBlockGroup gives k+m DataNodes; one unit write stream per unit (the data transfer
protocol: each cell goes out with ``sendmsg``, straight from the encoder's buffers); stripe n+1
is read and encoded (in a worker thread: the codec releases the GIL) while stripe n is in flight.
A group of one short stripe has no stream to its zero units (ec/layout.py; 9 stored their 0
bytes before): a 10-byte RS-6-3 file is 4 streams and 4 fsyncs, units 0, 6, 7, 8. A DataNode
that fails mid-write is dropped; the group carries on while at least ``min_units`` (k) units are
still being written, and the NameNode repairs the rest. A DataNode that stops making progress
(frozen, or far slower than its peers) is dropped too, without waiting out a fixed timeout: once
k + 1 of the group's streams (and at least ``min_units``) have finished a step (a stripe's cells,
or the finish), the others have max(0.25 s, 8 x the time those took) to finish it (1 s for the
finish, which includes an fsync), and the late ones are dropped. With fewer to spare, a step may
take up to 20 s before the stream is dropped.

A replicated block (REPLICATE-n) is written the same way: a parallel fan-out of the same buffers
to n DataNodes (the codec's "parity" is the data itself), not HDFS's pipeline through them. Why:
a pipeline is as slow as its slowest DataNode on every packet and needs recovery when one
breaks; a fan-out drops a slow or dead replica and carries on while ``min_units`` (the NameNode's
--min-replicas) remain, exactly as an EC group drops a unit, with the same receipts, checks and
repair. The cost is the client's uplink: n copies leave it (3x for REPLICATE-3, 1.5x for RS-6-3). The next group is placed away from DataNodes that
failed. Complete is called only after every surviving unit has been finalized (fsync'd and
renamed into place) on its DataNode; any failure abandons the file, so nothing half-written is
ever visible. The write renews its lease every third of the NameNode's lease timeout while it
runs, however slowly its source delivers; a writer that dies stops renewing and is abandoned.
"""

import asyncio
import concurrent.futures
import dataclasses
import logging
import os
import queue
import threading
from typing import Awaitable, Callable, Sequence

from hedgefs.client.errors import HedgefsError, NotFound, Unavailable
from hedgefs.client.transport import DataNodeClient, TransferError
from hedgefs.client.unit_writes import UnitWrite
from hedgefs.ec import layout
from hedgefs.ec.policy import Policy, parse_policy
from hedgefs.plumbing import describe
from hedgefs.proto import hedgefs_pb2 as pb

log = logging.getLogger("hedgefs.client.writer")

# One step of a unit write (a cell, the finish) that takes longer than this means the DataNode is gone.
WRITE_TIMEOUT_S = 20.0
# A stream still busy with a step its peers have finished: dropped after max(floor, factor x their time).
STALL_FACTOR = 8.0
STALL_FLOOR_S = 0.25
FINISH_STALL_FLOOR_S = 1.0
_COMPLETE_ATTEMPTS = 4  # 0.5 + 1 + 2 s of back-off: rides out a NameNode restart

ReadFn = Callable[[int], bytes]
NameNodeRpc = Callable[[str, object], Awaitable]  # (method, request) -> response; raises HedgefsError


class _UnitStream:
    """One internal block being written to one DataNode."""

    def __init__(self, datanodes: DataNodeClient, group_id: int, generation: int, loc: pb.UnitLocation):
        self.index = loc.index
        self.datanode_id = loc.datanode_id
        self.group_id = group_id
        self.write = UnitWrite(datanodes, loc.data_address, group_id, loc.index, generation=generation,
                               token=loc.token, peer=loc.datanode_id)
        self.error: str | None = None

    @property
    def alive(self) -> bool:
        return self.error is None

    async def send(self, cell) -> None:
        async with asyncio.timeout(WRITE_TIMEOUT_S):
            await self.write.send([cell])

    async def finish(self, length: int) -> None:
        async with asyncio.timeout(WRITE_TIMEOUT_S):
            stored = await self.write.finish(length)
        if stored != length:
            raise HedgefsError(f"{self.datanode_id} stored {stored} of {length} bytes")

    def fail(self, err: BaseException | str) -> None:
        if self.error is None:
            self.error = err if isinstance(err, str) else _describe(err)
            # INFO, not WARNING: the put carries on (or fails with one error naming every failed
            # unit); the CLI's stderr is one line per error, and -v shows this.
            log.info("unit %d/%d on %s failed: %s", self.group_id, self.index, self.datanode_id, self.error)
            self.write.abort()

    def abort(self) -> None:
        self.write.abort()


@dataclasses.dataclass
class GroupWritten:
    length: int  # data bytes in the group
    stored_units: list[int]  # unit indexes durably stored
    failed_datanodes: list[str]  # to leave out of the next group
    next_stripe: bytes  # the first stripe of the next group (b"" at the end of the input)


class SourceThreads:
    """Threads for sources' reads, kept between files (a mount's ``tar x`` writes hundreds of
    files a second: a thread started and stopped a file was ~4 % of its CPU). Never bounded: a
    read may block for as long as its source is idle (a pipe, a FUSE writer), and a bound would
    make the next write wait for it; a thread idle for ``IDLE_S`` ends."""

    IDLE_S = 30.0

    def __init__(self):
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue] = []   # parked threads' inboxes, the latest last

    def submit(self, fn: Callable, *args) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), name="hedgefs-source", daemon=True).start()
        inbox.put((future, fn, args))
        return future

    def _serve(self, inbox: queue.SimpleQueue) -> None:
        while True:
            try:
                future, fn, args = inbox.get(timeout=self.IDLE_S)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:   # else taken just now: its job is on the way
                        self._idle.remove(inbox)
                        return
                continue
            result = error = None
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args)
                except BaseException as err:
                    error = err
            with self._lock:   # parked before the answer: the reader's next read finds this thread
                self._idle.append(inbox)
            if error is not None:
                future.set_exception(error)
            elif future.running():
                future.set_result(result)
            del future, fn, args, result, error   # (not kept alive while parked)

    def forget(self) -> None:
        """In a forked child: the parent's threads are not there."""
        self._lock = threading.Lock()
        self._idle = []


_SOURCE_THREADS = SourceThreads()
os.register_at_fork(after_in_child=_SOURCE_THREADS.forget)


class StripeSource:
    """The bytes being put, a stripe at a time, read in a thread of their own.

    A read is short only at the end of the input: pipes and sockets return what they have, and
    taking a short read for the end would store a truncated file. Its own thread (from
    ``SourceThreads``), because a slow source (an idle pipe) must not hold a worker that
    encoding and decoding need.
    """

    def __init__(self, read: ReadFn, threads: SourceThreads = _SOURCE_THREADS):
        self._read = read
        self._threads = threads

    async def read(self, n: int) -> bytes:
        return await asyncio.wrap_future(self._threads.submit(self._read_full, n))

    def _read_full(self, n: int) -> bytes:
        parts, got = [], 0
        while got < n:
            part = self._read(n - got)
            if not part:
                break
            parts.append(part)
            got += len(part)
        return parts[0] if len(parts) == 1 else b"".join(parts)


class StripedWriter:
    def __init__(self, datanodes: DataNodeClient, rpc: NameNodeRpc):
        self._datanodes = datanodes
        self._rpc = rpc

    @property
    def datanodes(self) -> DataNodeClient:
        return self._datanodes

    async def write_file(self, path: str, read: ReadFn, *, overwrite: bool, policy_name: str | None,
                         progress: Callable[[int], None], block_size: int = 0,
                         convert_from: pb.FileVersion | None = None) -> int:
        """Store everything ``read`` yields at ``path``; visible only once complete. Returns the length.
        ``convert_from``: this rewrites that version of ``path`` in another policy (``ec convert``)."""
        created = await self.create(path, overwrite=overwrite, policy_name=policy_name, block_size=block_size,
                                    convert_from=convert_from)
        return await self.write_created(created, read, progress, convert_from=convert_from)

    async def create(self, path: str, *, overwrite: bool, policy_name: str | None, block_size: int = 0,
                     convert_from: pb.FileVersion | None = None) -> pb.CreateResponse:
        """The NameNode's Create: the file exists, invisible, until ``write_created`` completes it
        (or abandons it); its refusals (exists, a directory, no such parent) are raised here."""
        return await self._rpc("Create", pb.CreateRequest(
            path=path, overwrite=overwrite, policy=policy_name or "", block_size=block_size,
            client_name=f"pid-{os.getpid()}", convert_from=convert_from, with_group=True))

    async def reopen(self, path: str, truncate_to: int | None = None,
                     rewrite_from: int | None = None) -> pb.AppendResponse | None:
        """The NameNode's Append (``truncate_to`` None) or Truncate: a new version of the file,
        copy-on-write of its last group (see AppendRequest in the proto). A truncate on a group
        boundary is done at once: None."""
        if truncate_to is None:
            return await self._rpc("Append", pb.AppendRequest(path=path, client_name=f"pid-{os.getpid()}",
                                                              rewrite_from=rewrite_from))
        answer = await self._rpc("Truncate", pb.TruncateRequest(path=path, length=truncate_to,
                                                                client_name=f"pid-{os.getpid()}"))
        return None if answer.done else answer.rewrite

    async def write_created(self, created: pb.CreateResponse, read: ReadFn, progress: Callable[[int], None],
                            convert_from: pb.FileVersion | None = None, kept_length: int = 0,
                            finish: Callable[[pb.CompleteRequest, frozenset], Awaitable] | None = None) -> int:
        """Write everything ``read`` yields into the file ``create`` made, and complete it; on any
        failure (``read`` raising included) abandon it: nothing half-written becomes visible.
        ``kept_length``: an append's or a truncate's (``reopen``): the bytes of the file's groups
        this version shares, before what ``read`` yields. ``finish(request, failed)``: what commits
        instead of Complete (a FileWriter's: ``sync`` for an hflush), told the DataNodes whose
        streams failed or stalled in this write. Returns the file's length."""
        source = StripeSource(read)
        renewal = asyncio.ensure_future(self._renew_lease(created.file_id, created.lease_timeout_ms / 3000))
        try:
            policy = parse_policy(created.policy)
            min_units = created.min_units or policy.k   # (a NameNode that does not say: k)
            commits, total, failed = [], 0, set()
            # The first group came with Create (with_group): a small file is Create and Complete.
            # (Unused, by an empty file, it goes at Complete.)
            first = created.first_group if created.HasField("first_group") and created.first_group.units else None
            data = await source.read(policy.stripe_data_size)
            while data:
                group, first = first or await self._add_block_group(created.file_id, failed), None
                written = await self.write_group(group, policy, created.block_size, data, source, progress, min_units)
                commits.append(pb.GroupCommit(group_id=group.id, length=written.length, stored_units=written.stored_units))
                failed.update(written.failed_datanodes)
                total += written.length
                data = written.next_stripe
            request = pb.CompleteRequest(file_id=created.file_id, length=kept_length + total, groups=commits,
                                         convert_from=convert_from)
            if finish is None:
                await self.complete(request)
            else:   # (with the DataNodes whose streams failed or stalled in this write)
                await finish(request, frozenset(failed))
            return kept_length + total
        except BaseException:
            await self._abandon(created.file_id)
            raise
        finally:
            renewal.cancel()

    async def _abandon(self, file_id: int) -> None:
        try:
            await asyncio.shield(self._rpc("Abandon", pb.AbandonRequest(file_id=file_id)))
        except HedgefsError:
            pass  # the NameNode's lease monitor cleans up what we could not

    async def _renew_lease(self, file_id: int, every_s: float) -> None:
        if every_s <= 0:
            return   # a NameNode that does not say its lease timeout
        while True:
            await asyncio.sleep(every_s)
            try:
                await self._rpc("RenewLease", pb.RenewLeaseRequest(file_id=file_id))
            except NotFound as err:
                log.warning("the NameNode dropped this write (%s): it will fail", err)
                return
            except HedgefsError as err:   # unreachable for now: the next renewal may get through
                log.info("cannot renew the lease of file %d: %s", file_id, err)

    async def _add_block_group(self, file_id: int, failed: set[str]) -> pb.BlockGroup:
        """A new group, away from DataNodes that failed earlier in this write if there are enough others."""
        if failed:
            try:
                return await self._rpc("AddBlockGroup", pb.AddBlockGroupRequest(file_id=file_id, exclude_datanodes=sorted(failed)))
            except HedgefsError as err:
                log.info("placing the next group away from %s failed (%s); trying them again", sorted(failed), err)
        return await self._rpc("AddBlockGroup", pb.AddBlockGroupRequest(file_id=file_id))

    async def complete(self, request: pb.CompleteRequest) -> None:
        """Complete, retried while the NameNode is unreachable (a repeated Complete is accepted)."""
        await self._committing("Complete", request)

    async def set_attributes(self, path: str, a: pb.CommitAttributes) -> None:
        """``a`` as SetPermission, SetOwner and SetTimes of the complete file (a NameNode whose
        Complete does not take them: CreateResponse.commit_attributes false)."""
        if a.HasField("permission"):
            await self._rpc("SetPermission", pb.SetPermissionRequest(path=path, permission=a.permission))
        if a.owner or a.group:
            await self._rpc("SetOwner", pb.SetOwnerRequest(path=path, owner=a.owner, group=a.group))
        if a.HasField("mtime_ms") or a.HasField("atime_ms"):
            await self._rpc("SetTimes", pb.SetTimesRequest(path=path, mtime_ms=a.mtime_ms if a.HasField("mtime_ms") else -1,
                                                           atime_ms=a.atime_ms if a.HasField("atime_ms") else -1))

    async def sync(self, request: pb.CompleteRequest, path: str, exclude=()) -> pb.AppendResponse:
        """hflush/hsync's one NameNode call (Sync): ``request``'s Complete, and an append to the
        version it makes begun at ``path`` (its open tail placed off ``exclude``: DataNodes whose
        replica of the last one failed); retried as Complete is."""
        return await self._committing("Sync", pb.SyncRequest(file_id=request.file_id, length=request.length,
                                                              groups=request.groups, path=path,
                                                              exclude_datanodes=list(exclude)))

    async def sync_length(self, file_id: int, length: int, tail_group_id: int, replicas: Sequence[int] = ()) -> None:
        """hsync on the open tail (open_tail.py): every replica of the tail (or those of unit
        indexes ``replicas``: the NameNode drops the others) holds the file's bytes up to
        ``length``: the file grows to it. Retried as Complete is (a repeat of a length already
        recorded changes nothing)."""
        await self._committing("SyncLength", pb.SyncLengthRequest(file_id=file_id, length=length,
                                                                  tail_group_id=tail_group_id,
                                                                  replicas=list(replicas)))

    async def _committing(self, method: str, request):
        for attempt in range(_COMPLETE_ATTEMPTS):
            try:
                return await self._rpc(method, request)
            except Unavailable:
                if attempt == _COMPLETE_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(0.5 * 2 ** attempt)

    async def write_group(self, group: pb.BlockGroup, policy: Policy, block_size: int, first_stripe: bytes,
                          source: "StripeSource", progress: Callable[[int], None],
                          min_units: int | None = None) -> "GroupWritten":
        """Write one block group starting with `first_stripe`, reading further stripes from `source`;
        fail once fewer than ``min_units`` (default k) of its units are still being written."""
        min_units = min_units or policy.k
        stripe_bytes = policy.stripe_data_size
        # A group of one short stripe (the source ended within it) is its whole length already:
        # its zero units (ec/layout.py) are neither encoded nor sent, a 10-byte RS-6-3 file is 4
        # streams and 4 fsyncs, not 9, with the same tolerance (any 3 of the 4 may fail).
        zeros = layout.zero_units(policy, len(first_stripe)) if len(first_stripe) < stripe_bytes else frozenset()
        streams = [_UnitStream(self._datanodes, group.id, group.generation, loc)
                   for loc in sorted(group.units, key=lambda u: u.index) if loc.index not in zeros]
        from hedgefs.ec.codec import codec_for  # here: reads never pay for loading the codec (numpy)

        codec = codec_for(policy)
        loop = asyncio.get_running_loop()
        stripes_per_group = layout.num_stripes(policy, layout.group_data_size(policy, block_size))
        # Once ``keep`` streams finished a step the others are late: k + 1 of a whole group's,
        # one more than the data units written of a short one.
        keep = max(policy.k + 1, min_units) - len(zeros)
        length = 0
        sending: asyncio.Task | None = None
        data = first_stripe
        try:
            for n in range(stripes_per_group):
                cells = await loop.run_in_executor(None, _encode, codec, policy, data)
                if sending is not None:
                    await sending
                self._check_enough(streams, zeros, policy, group.id, min_units)
                sending = asyncio.ensure_future(self._send_stripe(streams, cells, keep))
                length += len(data)
                progress(len(data))
                if len(data) < stripe_bytes:
                    data = b""
                    break
                data = await source.read(stripe_bytes)
                if not data:
                    break
            if sending is not None:
                await sending
            await self._finish_all(streams, layout.unit_lengths(policy, length), keep)
            self._check_enough(streams, zeros, policy, group.id, min_units)
        except BaseException:
            for s in streams:
                s.abort()
            raise
        return GroupWritten(length, [s.index for s in streams if s.alive],
                            [s.datanode_id for s in streams if not s.alive], data)

    async def _send_stripe(self, streams: list[_UnitStream], cells: list, keep: int) -> None:
        async def send(stream: _UnitStream) -> None:
            try:
                await stream.send(cells[stream.index])
            except (TransferError, TimeoutError, HedgefsError) as err:
                stream.fail(err)

        await self._step([s for s in streams if s.alive and len(cells[s.index])], send, keep, STALL_FLOOR_S)

    async def _finish_all(self, streams: list[_UnitStream], lengths: list[int], keep: int) -> None:
        async def finish(stream: _UnitStream) -> None:
            try:
                await stream.finish(lengths[stream.index])
            except (TransferError, TimeoutError, HedgefsError) as err:
                stream.fail(err)

        await self._step([s for s in streams if s.alive], finish, keep, FINISH_STALL_FLOOR_S)

    @staticmethod
    async def _step(streams: list[_UnitStream], work, keep: int, floor_s: float) -> None:
        """Run ``work`` on every stream at once. Once ``keep`` (k + 1, at least min_units) have
        finished it, the rest get max(floor_s, 8 x that time) more; a stream still busy then is
        dropped (its DataNode is frozen or far slower than its peers)."""
        loop = asyncio.get_running_loop()
        tasks = {asyncio.ensure_future(work(s)): s for s in streams}
        pending, began, deadline = set(tasks), loop.time(), None
        try:
            while pending:
                timeout = None if deadline is None else max(0.0, deadline - loop.time())
                done, pending = await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                finished = sum(1 for t, s in tasks.items() if t.done() and s.alive)
                if done:
                    if deadline is None and pending and finished >= keep:
                        deadline = began + max(floor_s, STALL_FACTOR * (loop.time() - began))
                    continue
                late = loop.time() - began
                for task in pending:
                    task.cancel()
                    tasks[task].fail(f"no progress for {late:.2f} s while {finished} other DataNodes of the "
                                     f"group finished the same step")
                await asyncio.wait(pending)
                return
        finally:
            for task in pending:
                task.cancel()

    @staticmethod
    def _check_enough(streams: list[_UnitStream], zeros: frozenset[int], policy: Policy, group_id: int,
                      min_units: int) -> None:
        """Enough units still being written: ``min_units``, the group's zero units counting as
        stored (they are, by its length), and for LRC a set that decodes."""
        alive = sum(s.alive for s in streams)
        if alive + len(zeros) < min_units or not policy.decodable(
                [s.index for s in streams if s.alive] + list(zeros)):   # LRC: not any k will do
            failures = "; ".join(f"{s.datanode_id}: {s.error}" for s in streams if not s.alive)
            what = (f"{policy.units} replicas of block {group_id}" if policy.replicated
                    else f"{len(streams)} units of block group {group_id}")
            raise HedgefsError(
                f"write failed: only {alive} of {what} are being written, {min_units - len(zeros)} needed "
                f"({failures})"
            )


def _encode(codec, policy: Policy, data: bytes) -> list:
    """Per unit (k data, then m parity), the cell of this stripe: views of ``data`` and of the
    codec's parity buffers, sent as they are. Runs in a worker thread: the codec releases the GIL."""
    data_cells = layout.split_stripe(policy, data)
    return data_cells + (codec.encode(data_cells) if len(data_cells[0]) else [b""] * policy.m)


def _describe(err: BaseException) -> str:
    if isinstance(err, TimeoutError):
        return f"no progress for {WRITE_TIMEOUT_S:.0f} s"
    return describe(err)
