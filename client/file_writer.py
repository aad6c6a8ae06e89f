"""A file being written, push-style: ``FileSystem.create(path) -> FileWriter`` (HDFS's DFSOutputStream).

    with fs.create("/data/out.bin", overwrite=True) as f:   # Create: its refusals are raised here
        for piece in pieces:
            f.write(piece)                                   # blocks while PIPE_BYTES wait to go out
    # closed: committed (an exception inside ``with`` aborts instead: no file appears)

``write`` hands the bytes to the library's striped writer (writer.py), which runs on the client's
event loop and reads them a stripe at a time from its source thread through a bounded pipe; so a
producer that writes faster than the DataNodes take the bytes waits in ``write`` rather than
filling memory. ``close`` ends the input and returns once the NameNode has completed the file:
a failure anywhere (a DataNode, the NameNode, a source) is raised by the ``write`` or ``close``
that meets it, and the file is abandoned, never left half-written; an overwritten file stays as
it was. ``abort`` abandons the write on purpose, and so does dropping the writer unclosed.

The bytes written are the caller's no longer than the call: ``write`` copies what is not
``bytes`` (a bytearray or memoryview the caller goes on to reuse). ``digests`` names hashlib
algorithms to hash the bytes with as they pass (an S3 PUT's MD5 ETag): ``hexdigest(name)``
once closed.

``set_permission``, ``set_owner`` and ``set_times`` before ``close`` give the version the mode,
owner and times it commits with: they go with the Complete and the NameNode applies them in the
same journal record, checked as ``FileSystem.set_permission`` etc. are (a refused attribute is
the ``close``'s error; the bytes are committed without it). A file untarred costs Create and
Complete, not four calls.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import hashlib
import io
import logging
import threading
import weakref
from typing import TYPE_CHECKING, Callable, Sequence

from hedgefs.client.errors import HedgefsError, NotAllowed, UsageError, WriteAborted
from hedgefs.client.open_tail import OpenTail, TailBroken
from hedgefs.ec.layout import group_data_size, zero_units
from hedgefs.ec.policy import parse_policy
from hedgefs.proto import hedgefs_pb2 as pb

if TYPE_CHECKING:
    from hedgefs.client.loop import LoopThread
    from hedgefs.client.writer import StripedWriter

log = logging.getLogger("hedgefs.client")

PIPE_BYTES = 8 << 20   # written bytes buffered before ``write`` waits for the stripes to go out
TAIL_BYTES = 16 << 20  # bytes of the last block group kept for an hflush to write again (more: read back)
# close's append and SyncLength of the open tail (_hold_tail): past this the Complete seals instead
# (a DataNode that stalls at close costs close this much, not the stall).
HOLD_TAIL_TIMEOUT_S = 5.0


class _Pipe:
    """Bytes from ``FileWriter.write`` to the striped writer's source thread (``read``), at most
    ``limit`` bytes waiting. The write's end (or failure) wakes a blocked ``put``; a failure set
    by ``fail`` is raised into ``read`` (the writer then abandons the file)."""

    def __init__(self, limit: int):
        self._limit = limit
        self._chunks: collections.deque[memoryview] = collections.deque()
        self._queued = 0
        self._ended = False
        self._failure: BaseException | None = None
        self._finished = False   # the striped write has ended (committed or failed)
        self._cond = threading.Condition()

    def put(self, data: bytes) -> bool:
        """False if the write has ended (failed) and takes nothing more."""
        with self._cond:
            self._cond.wait_for(lambda: self._queued < self._limit or self._finished)
            if self._finished:
                return False
            self._chunks.append(memoryview(data))
            self._queued += len(data)
            self._cond.notify_all()
            return True

    def end(self) -> None:
        with self._cond:
            self._ended = True
            self._cond.notify_all()

    def fail(self, err: BaseException) -> None:
        with self._cond:
            self._failure = err
            self._chunks.clear()
            self._cond.notify_all()

    def finished(self) -> None:
        with self._cond:
            self._finished = True
            self._chunks.clear()
            self._cond.notify_all()

    def read(self, n: int) -> bytes:
        with self._cond:
            self._cond.wait_for(lambda: self._chunks or self._ended or self._failure is not None)
            if self._failure is not None:
                raise self._failure
            if not self._chunks:
                return b""
            head = self._chunks[0]
            if len(head) <= n:
                self._chunks.popleft()
                out = head
            else:
                out, self._chunks[0] = head[:n], head[n:]
            self._queued -= len(out)
            self._cond.notify_all()
            whole = isinstance(out.obj, bytes) and len(out) == len(out.obj)
            return out.obj if whole else bytes(out)


class _Tail:
    """The bytes written into the file's last block group so far (from its start, a multiple of
    ``full``, to ``end``), while they are at most TAIL_BYTES: what an hflush writes again. Kept
    only by a writer that has hflushed (``keep``): a put that never does copies nothing."""

    def __init__(self, at: int, full: int, keep: bool):
        self.full, self.keep = full, keep
        self.start = self.end = at
        self._bytes: bytearray | None = bytearray() if keep else None   # None: not kept

    def add(self, data: bytes) -> None:
        end = self.end + len(data)
        group = end - end % self.full   # where the group of the next byte starts
        if group > self.start:   # a group ended: keep only what follows its end
            self.start = group
            if self.keep:
                self._bytes = bytearray(data[len(data) - (end - group):])
        elif self._bytes is not None:
            self._bytes += data
        if self._bytes is not None and len(self._bytes) > TAIL_BYTES:
            self._bytes = None
        self.end = end

    def since(self, start: int, end: int) -> bytes | None:
        """Bytes [start, end) of the file, if they are the ones kept."""
        if self._bytes is None or (start, end) != (self.start, self.end):
            return None
        return bytes(self._bytes)


class _Sync:
    """An hflush asked of the running part, and the NameNode's answer (Sync's AppendResponse)."""
    asked = False
    answer = None
    exclude: tuple = ()   # DataNodes whose replica of the last open tail failed: not in the next


class FileWriter:
    """One file being written (see the module): ``write`` in order, then ``close`` (commits) or
    ``abort``. Thread-safe; the bytes go out in the order the calls return."""

    def __init__(self, loop: "LoopThread", writer: "StripedWriter", created, path: str,
                 digests: Sequence[str] = (), start: int = 0, kept_length: int = 0, prefix=None,
                 done: Callable[[], None] | None = None, reread: Callable[..., tuple] | None = None):
        """An append (``FileSystem.append``): ``start`` is the file's length before it, whose
        bytes from ``kept_length`` on (the last, partial group: copy-on-write) ``prefix`` (a
        ``read(n)``) yields before what ``write`` is given; ``done`` is called when the write
        ends. ``reread(writer, answer, end)``: (read, done) of the file's bytes [answer.kept_length,
        end) from its DataNodes (``FileSystem._old_bytes``), for an ``hflush`` whose last group
        was too large to keep here; None: this writer cannot go on after a commit."""
        self.path = path
        self.start = start   # the file's length before this write (an append's; 0 for a new file)
        self.written = 0   # bytes accepted by ``write``
        self.length: int | None = None   # once committed: the file's length
        self._hashes = {name: hashlib.new(name) for name in digests}
        self._lock = threading.Lock()
        self._closed = False
        self._loop, self._writer, self._reread = loop, writer, reread
        self.attributes = pb.CommitAttributes()   # what set_permission/set_owner/set_times asked
        self._open: OpenTail | None = None   # an EC file's open tail, after a Sync placed one
        self._unsent = bytearray()           # what the open tail's replicas lack (kept only while it is open)
        self._begin(created, start, kept_length, prefix, done, keep=False)

    def _begin(self, created, start: int, kept_length: int, prefix, done, keep: bool) -> None:
        self._file_id = created.file_id
        self._pipe = pipe = _Pipe(PIPE_BYTES)
        self._full = full = group_data_size(parse_policy(created.policy), created.block_size)
        self._tail = tail = _Tail(kept_length, full, keep)
        self._sync = sync = _Sync()
        hashes = list(self._hashes.values())
        path, writer, attributes = self.path, self._writer, self.attributes
        policy, me = parse_policy(created.policy), weakref.ref(self)   # (finish holds no FileWriter either)
        rewrite = [prefix, start - kept_length]   # what is left of the prefix to read

        def read(n: int) -> bytes:   # the striped writer's source (its own thread); holds no FileWriter
            if rewrite[1] > 0:
                data = rewrite[0](min(n, rewrite[1]))
                if not data:
                    raise HedgefsError(f"{path}: the file ended {rewrite[1]} bytes early while its last "
                                       f"block group was rewritten: it changed meanwhile")
                rewrite[1] -= len(data)
                tail.add(data)
                return data
            data = pipe.read(n)
            for h in hashes:
                h.update(data)
            tail.add(data)
            return data

        async def finish(request, failed):   # Complete, or an hflush's Sync (the answer: where to go on)
            if sync.asked:
                sync.answer = await writer.sync(request, path, sync.exclude)
                return
            held = me()
            if held is not None:
                await held._hold_tail(request, policy, failed)
            del held
            if not attributes.ListFields():
                await writer.complete(request)
            elif created.commit_attributes:   # (set before close ended the input: see _attribute)
                request.attributes.CopyFrom(attributes)
                try:
                    await writer.complete(request)
                except (NotAllowed, UsageError) as err:
                    if type(err) not in (NotAllowed, UsageError):   # (not found, exists...: the write's own)
                        raise
                    # A chmod, chown or utimes refused (checked before anything is logged) is not
                    # the bytes': they are committed without it, and close says what was refused,
                    # as the calls after a commit did (a non-admin's `cp -p` keeps its copy).
                    request.ClearField("attributes")
                    await writer.complete(request)
                    raise
            else:   # an older NameNode, whose Complete would drop them: the calls after it, as before
                await writer.complete(request)
                await writer.set_attributes(path, attributes)

        self._future: concurrent.futures.Future = self._loop.submit(
            writer.write_created(created, read, lambda _n: None, kept_length=kept_length, finish=finish))
        self._future.add_done_callback(lambda _f: pipe.finished())
        if done is not None:
            self._future.add_done_callback(lambda _f: done())

    def hflush(self) -> int:
        """Every byte written so far becomes the file's, visible to every new reader and durable
        (each group on at least k DataNodes, or on the m + 1 replicas of an open tail: ``hsync``
        is the same call), and writing goes on; the file's length then.

        The first hflush is copy-on-write of the last group: the write so far is committed and
        an append to it begun, in one NameNode call (Sync: Complete, Append and the new last
        group's AddBlockGroup, one wait until durable); the file's last, partial group is then
        written again from the bytes kept here since the previous hflush (up to TAIL_BYTES; at
        the first hflush, or beyond, read back from the DataNodes). For an erasure-coded file
        the Sync also places an open tail (open_tail.py): the next hflushes APPEND the new bytes
        to its replicas and record the length (SyncLength), while the last group is still
        written erasure coded for the Complete that seals it; a tail that fails or fills its
        group is given up, and that hflush is a Sync again. A failure is raised here and ends
        the writer (what an earlier hflush committed stays)."""
        with self._lock:
            if self._closed:
                raise ValueError(f"{self.path}: hflush of a closed FileWriter")
            if self._reread is None:
                raise ValueError(f"{self.path}: this FileWriter cannot go on after a commit")
            if self._open is not None:
                synced = self._tail_sync()
                if synced is not None:
                    return synced
            self._sync.asked = True
            self._pipe.end()
            try:
                length = self._future.result()
                answer = self._sync.answer
                kept = self._tail.since(answer.kept_length, length)
                if kept is not None:
                    prefix, done = io.BytesIO(kept).read, None
                else:
                    prefix, done = self._reread(self._writer, answer, length)
                self._begin(answer.write, length, answer.kept_length, prefix, done, keep=True)
                if answer.HasField("tail") and kept is not None and len(kept) <= self._full:
                    self._open = OpenTail(self._writer.datanodes, answer.tail, answer.kept_length, self._full)
                    self._unsent = bytearray(kept)
            except HedgefsError:
                self._closed = True
                raise
            except Exception:   # noqa: BLE001
                self._closed = True
                self._raise_failure()
            return length

    hsync = hflush

    def set_permission(self, mode: int) -> None:
        """The mode (0..0o7777) the file commits with (chmod of the file being written)."""
        self._attribute(permission=mode)

    def set_owner(self, owner: str = "", group: str = "") -> None:
        """The owner and group the file commits with ("" = unchanged; chown as FileSystem's)."""
        self._attribute(**{k: v for k, v in (("owner", owner), ("group", group)) if v})

    def set_times(self, mtime_ms: int | None = None, atime_ms: int | None = None) -> None:
        """The mtime and atime (ms since the epoch) the file commits with; None: the commit's time."""
        self._attribute(**{k: v for k, v in (("mtime_ms", mtime_ms), ("atime_ms", atime_ms)) if v is not None})

    def _attribute(self, **fields) -> None:
        """Record ``fields`` for the Complete. Before ``close`` only: close ends the input under
        the lock, and the striped writer reads ``attributes`` only after the input ended."""
        with self._lock:
            if self._closed:
                raise ValueError(f"{self.path}: attributes set on a closed FileWriter")
            for name, value in fields.items():
                setattr(self.attributes, name, value)

    def _tail_sync(self) -> int | None:
        """hflush on the open tail: the bytes its replicas lack appended to each, then the
        length recorded (SyncLength); the file's length. None if the tail is given up (a
        replica failed, or the bytes overflow its group): the caller Syncs instead."""
        tail, unsent = self._open, self._unsent
        if not unsent:
            return tail.end   # nothing new since the last: durable and visible already
        self._open, self._unsent = None, bytearray()   # given up unless this sync succeeds
        if not tail.fits(len(unsent)):
            return None
        try:
            end = self._loop.call(tail.append(bytes(unsent)))
        except TailBroken as err:
            log.info("%s: %s; this hflush is a Sync (copy-on-write of the last group)", self.path, err)
            self._sync.exclude = (err.datanode_id,) if err.datanode_id else ()
            return None
        try:
            self._loop.call(self._writer.sync_length(self._file_id, end, tail.group.id))
        except HedgefsError as err:
            log.info("%s: the NameNode did not take the open tail's length (%s); this hflush is a Sync",
                     self.path, err)
            return None
        self._open = tail
        return end

    async def _hold_tail(self, request: pb.CompleteRequest, policy, failed: frozenset = frozenset()) -> None:
        """close on the open tail, when the group the striped writer wrote over the tail's bytes
        lacks units (streams failed: it is committed with k at least): the bytes the tail's
        replicas lack are appended and the length recorded first, as an hsync would, so that the
        tail holds every byte of that group and the NameNode's Complete keeps it as the file's
        last group instead (Writes.tail_kept: the hsynced bytes keep the replicas that took them,
        when those hold more redundancy than the group). A tail that fails now changes nothing:
        the Complete seals with the group, as before.

        close never waits on a stalled DataNode for it (review-seal S1): a group is short because
        a DataNode failed or stalled, and the tail's replicas mostly share the group's DataNodes.
        A replica on a DataNode whose stream failed or was dropped as late in this write
        (``failed``) is as doubtful as the stream: close leaves it out of the tail (review-final F1,
        as HDFS's pipeline recovery goes on with the DataNodes left), appending to the others and
        naming them in the SyncLength, on which the NameNode leaves it out too. It skips the tail only when
        those good replicas hold no more redundancy than the group (good replicas - 1 <= stored
        units - k: the NameNode would seal anyway). The append and SyncLength together get
        HOLD_TAIL_TIMEOUT_S, after which the Complete seals (a DataNode that stalls only now)."""
        tail, unsent = self._open, self._unsent
        if tail is None or not request.groups or request.length != tail.end + len(unsent):
            return
        last = request.groups[-1]
        stored = set(last.stored_units) | zero_units(policy, last.length)
        if last.length != request.length - tail.start or not unsent or len(stored) >= policy.units:
            return   # not the tail's group, nothing to add (the NameNode has the length), or whole
        if not tail.fits(len(unsent)):
            return
        left_out = sorted(failed & {u.datanode_id for u in tail.units})
        good = len(tail.units) - len(left_out)
        if good - 1 <= len(stored) - policy.k:
            log.info("%s: block group %d lacks units (stored %s) and the open tail's replicas on DataNodes whose "
                     "streams did not fail (%d; failed: %s) hold no more: the group is sealed", self.path,
                     last.group_id, sorted(last.stored_units), good, left_out)
            return
        if left_out:
            tail.leave_out(left_out)
            log.info("%s: close goes on with the open tail without its replicas on %s, whose streams failed in "
                     "this write", self.path, left_out)
        try:
            async with asyncio.timeout(HOLD_TAIL_TIMEOUT_S):
                end = await tail.append(bytes(unsent))
                await self._writer.sync_length(self._file_id, end, tail.group.id,
                                               tail.replicas if left_out else ())
        except (HedgefsError, TimeoutError) as err:
            why = err if isinstance(err, HedgefsError) else f"no answer in {HOLD_TAIL_TIMEOUT_S:g} s"
            log.info("%s: keeping the open tail at close failed (%s); block group %d is sealed with units "
                     "%s", self.path, why, last.group_id, sorted(last.stored_units))
            return
        self._unsent = bytearray()
        log.info("%s: block group %d lacks units (stored %s): the open tail, %d bytes on %d replicas, stays the "
                 "file's last group", self.path, last.group_id, sorted(last.stored_units), tail.length,
                 len(tail.units))

    def write(self, data) -> int:
        """Hand ``data`` (bytes-like) to the writer; the length. Raises the write's error if it
        has failed, WriteAborted once aborted, ValueError once closed."""
        n = len(memoryview(data).cast("B")) if not isinstance(data, bytes) else len(data)
        with self._lock:
            if self._closed:
                raise ValueError(f"{self.path}: write to a closed FileWriter")
            if not n:
                return 0
            data = data if isinstance(data, bytes) else bytes(memoryview(data).cast("B"))
            if not self._pipe.put(data):
                self._raise_failure()
            if self._open is not None:
                if self._open.fits(len(self._unsent) + n) and len(self._unsent) + n <= TAIL_BYTES:
                    self._unsent += data
                else:   # past the tail's group, or more than kept here: the next hflush is a Sync
                    self._open, self._unsent = None, bytearray()
            self.written += n
            return n

    def close(self) -> int:
        """End the input and wait until the NameNode has the file complete; its length. A failure
        is raised here (the file abandoned). Closing again returns the length (or raises again)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._pipe.end()
        try:
            self.length = self._future.result()
        except HedgefsError:
            raise
        except Exception:   # noqa: BLE001
            self._raise_failure()
        return self.length

    def abort(self) -> None:
        """Abandon the write: nothing is committed, and ``close`` raises WriteAborted. Returns once
        the NameNode was told (an overwritten file is left as it was). Nothing after a commit."""
        with self._lock:
            self._closed = True
            if not self._future.done():
                self._pipe.fail(WriteAborted(f"{self.path}: the write was aborted"))
        try:
            self._future.result()
        except Exception:   # noqa: BLE001 - what an abort ends with
            pass

    @property
    def committed(self) -> bool:
        return self.length is not None

    def hexdigest(self, name: str) -> str:
        """The ``digests`` hash ``name`` of every byte written (once closed)."""
        return self._hashes[name].hexdigest()

    def _raise_failure(self):
        err = self._future.exception() if self._future.done() else None
        if isinstance(err, HedgefsError):
            raise err
        raise HedgefsError(f"{self.path}: the write failed: {err}") from err

    def __del__(self) -> None:
        """Dropped unclosed: abandoned (never committed), without waiting for the NameNode."""
        if not getattr(self, "_closed", True) and not self._future.done():
            self._pipe.fail(WriteAborted(f"{self.path}: the FileWriter was dropped unclosed"))

    def __enter__(self) -> "FileWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()
