"""A copy job: list in parallel, copy segments in parallel with hedges, commit each file at once.

    listers (--list-threads)   walk the source tree, make the destination's directories, plan
                               each file (segments of whole destination block groups; -update and
                               resume decided by checksum) into a bounded queue
    copiers (--workers)        copy one segment each: read it from the source (hedged reads), write
                               it as a part of its own in the staging directory, check the part's
                               checksum against the CRC of the bytes read
    the coordinator            starts a second copy of a segment that is late (--hedge-after-ms,
                               or auto: 1.5 x the p95 of segment times so far), reading other units
                               where it can, within --max-hedged per cent of the segments; the
                               first copy to finish wins, the other is cancelled and its part deleted
    committers                 when a file's segments are all in: check the source did not change,
                               then concat the parts into the target (one NameNode transaction), or
                               for a local destination rename the finished temp file into place

Staging lives beside the destination, ``<parent of DST>/.distcp-<job id>/``, named by the job's
arguments: ``job.json`` (where each source goes, fixed by the first run), one directory per target
(its presence means this job may write that target) holding the parts, named by the source file's
identity and the segment. A job killed at any moment and run again with the same arguments finds
its finished parts and files (a file it already committed is recognised by its checksum) and does
the rest; nothing is visible at a destination path until its commit, which is atomic. The staging
directory goes when the job succeeds.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import logging
import os
import queue
import threading
import time

from hedgefs.client.errors import AlreadyExists, HedgefsError, NotFound, UsageError
from hedgefs.client.fs import FileSystem
from hedgefs.distcp import plan
from hedgefs.distcp.sides import Entry, Location, basename, join, parent_of
from hedgefs.distcp.stream import Cancelled, SegmentStream, SourceChanged
from hedgefs.ec import layout
from hedgefs.ec.crc import combine_all
from hedgefs.ec.policy import parse_policy

log = logging.getLogger("hedgefs.distcp")
_RUN = os.urandom(4).hex()   # this process's run of a job: part names of its own

LOCAL_BLOCK = 128 * 1024 * 1024   # a segment's "block" when the destination is a local disk
_MAX_ATTEMPTS = 3                  # copies of one segment: the first, a hedge, a retry after failure


def default_workers() -> int:
    return min(32, 4 * (os.cpu_count() or 2))


@dataclasses.dataclass
class Options:
    update: bool = False
    overwrite: bool = False
    policy: str | None = None
    blocks_per_chunk: int = 1
    list_threads: int = 6
    workers: int = dataclasses.field(default_factory=default_workers)
    hedge_after_s: float | None = None   # None: auto
    hedging: bool = True
    max_hedged_percent: float = 10.0
    read_step: int = 4 * 1024 * 1024


@dataclasses.dataclass
class Attempt:
    n: int
    started: float
    exclude: tuple[str, ...] = ()
    ended: float | None = None
    outcome: str = "running"        # running | won | lost | cancelled | failed
    part: str | None = None
    error: str = ""
    stream: SegmentStream | None = None
    overdue_at_start: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class SegmentState:
    file: "FileJob"
    segment: plan.Segment
    attempts: list[Attempt] = dataclasses.field(default_factory=list)
    done: bool = False
    resumed: bool = False
    hedged: bool = False
    part: str | None = None          # the winner's part (cluster destination)
    crc: int = 0


@dataclasses.dataclass
class FileJob:
    src: Location
    source: Entry
    target: str
    overwrite: bool
    tkey: str
    skey: str
    policy: str | None = None
    block_size: int = 0
    states: list[SegmentState] = dataclasses.field(default_factory=list)
    reader: object = None
    local_fd: int | None = None
    left: int = 0
    failed: str = ""


class DistCp:
    def __init__(self, sources: list[Location], destination: Location, options: Options,
                 src_sides: dict, dst_side, dst_fs: FileSystem | None):
        self.sources = sources
        self.destination = destination
        self.options = options
        self.src_sides = src_sides      # namenode (None = local) -> side
        self.dst = dst_side
        self.dst_fs = dst_fs
        mode = "update" if options.update else "overwrite" if options.overwrite else ""
        self.id = plan.job_id([str(s) for s in sources], str(destination), mode)
        self.staging = join(parent_of(destination.path), f".distcp-{self.id}")
        self.delay = plan.HedgeDelay(options.hedge_after_s)
        self._lock = threading.Condition()
        self._segments: queue.Queue = queue.Queue(maxsize=max(4, 2 * options.workers))
        self._abort = threading.Event()
        self._fatal: BaseException | None = None
        self._listing_done = False
        self._running: list[SegmentState] = []
        self._commits: list[concurrent.futures.Future] = []
        self.t0 = time.monotonic()
        self.counts = dict(files=0, files_skipped=0, files_resumed=0, files_failed=0, bytes=0, bytes_resumed=0, bytes_planned=0,
                           files_planned=0,
                           segments=0, segments_planned=0, segments_resumed=0, segments_hedged=0, hedge_wins=0,
                           segments_retried=0, directories=0)
        self.failures: list[str] = []
        self._policies: dict = {}   # destination directory -> its GetPolicy answer
        self.done_segments: list[SegmentState] = []
        self._hedge_pool = concurrent.futures.ThreadPoolExecutor(options.workers, thread_name_prefix="distcp-hedge")
        self._commit_pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="distcp-commit")

    # ------------------------------------------------------------------ the whole job

    def run(self, on_progress=None) -> dict:
        roots = self._resolve()
        listing = threading.Thread(target=self._list_all, args=(roots,), name="distcp-list", daemon=True)
        copiers = [threading.Thread(target=self._copier, name=f"distcp-copy-{i}", daemon=True)
                   for i in range(self.options.workers)]
        listing.start()
        for t in copiers:
            t.start()
        try:
            self._coordinate(on_progress)
        except BaseException:
            self._stop()
            raise
        finally:
            listing.join(timeout=30)
            for _ in copiers:
                self._put_forced(None)
            for t in copiers:
                t.join(timeout=30)
            concurrent.futures.wait(self._commits)
            self._hedge_pool.shutdown(wait=True, cancel_futures=True)
            self._commit_pool.shutdown(wait=True)
        if self._fatal is not None:
            if isinstance(self._fatal, UsageError):
                self._remove_staging()   # refused for bad input: the same command can never resume it
            raise self._fatal
        if not self.failures:
            self._remove_staging()
        return self.report()

    def _stop(self) -> None:
        self._abort.set()
        with self._lock:
            for state in self._running:
                for a in state.attempts:
                    if a.stream is not None:
                        a.stream.cancel()
            self._lock.notify_all()

    def _fail_job(self, err: BaseException) -> None:
        with self._lock:
            if self._fatal is None:
                self._fatal = err
        self._stop()

    def _put_forced(self, item) -> None:
        """Queue a sentinel even if the queue is full of segments nobody will copy (abort)."""
        while True:
            try:
                self._segments.put(item, timeout=0.1)
                return
            except queue.Full:
                try:
                    self._segments.get_nowait()
                except queue.Empty:
                    pass

    # ------------------------------------------------------------------ where things go

    def _resolve(self) -> list[tuple[Location, Entry, str]]:
        """(source, its entry, its target path) per source; fixed by the first run in job.json."""
        entries = []
        for src in self.sources:
            entry = self._src(src).stat(src.path)
            if entry is None:
                hint = f" (a local file? use file://{src.path})" if not src.is_local and os.path.exists(src.path) else ""
                raise NotFound(f"no such file or directory: {src}{hint}")
            entries.append(entry)
        manifest = self._read_manifest()
        if manifest is not None:
            targets = manifest["targets"]
        else:
            dst_entry = self.dst.stat(self.destination.path)
            dst_is_dir = dst_entry is not None and dst_entry.is_dir
            if len(self.sources) > 1 and dst_entry is not None and not dst_is_dir:
                raise UsageError(f"copying {len(self.sources)} sources needs a directory as destination: "
                                 f"{self.destination} is a file")
            targets = [self._target_root(s, e, dst_is_dir) for s, e in zip(self.sources, entries)]
        roots = []
        for src, entry, target in zip(self.sources, entries, targets):
            if src.namenode == self.destination.namenode and _is_under(target, src.path, src.is_local):
                if entry.is_dir:
                    raise UsageError(f"cannot copy directory {src} into itself: {Location(src.namenode, target)}")
                if target == src.path:
                    raise UsageError(f"source and destination are the same file: {src}")
            roots.append((src, entry, target))
        if manifest is None:
            self.dst.mkdirs(parent_of(self.destination.path))
            self.dst.mkdirs(self.staging)
            self._write_manifest({"sources": [str(s) for s in self.sources], "destination": str(self.destination),
                                  "targets": targets})
        return roots

    def _target_root(self, src: Location, entry: Entry, dst_is_dir: bool) -> str:
        """Hadoop's rules: SRC goes into an existing DST directory (or into DST when there are
        several sources), else it becomes DST; with -update or -overwrite a directory's contents go
        to DST itself, so that running the same command again compares like with like."""
        if entry.is_dir and (self.options.update or self.options.overwrite):
            return self.destination.path
        if (dst_is_dir or len(self.sources) > 1) and src.path != "/":
            return join(self.destination.path, basename(src.path))
        return self.destination.path

    def _src(self, location: Location):
        return self.src_sides[location.namenode]

    def _read_manifest(self) -> dict | None:
        path = join(self.staging, "job.json")
        try:
            if self.dst_fs is not None:
                return json.loads(self.dst_fs.read_bytes(path))
            with open(path, "rb") as f:
                return json.loads(f.read())
        except (NotFound, FileNotFoundError):
            return None

    def _write_manifest(self, doc: dict) -> None:
        data = json.dumps(doc).encode()
        path = join(self.staging, "job.json")
        if self.dst_fs is not None:
            self.dst_fs.write_bytes(path, data, overwrite=True, policy=self.options.policy)
        else:
            tmp = path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)

    # ------------------------------------------------------------------ listing and planning

    def _list_all(self, roots) -> None:
        """Walk the sources with --list-threads listers; files are planned as they are found."""
        work: queue.Queue = queue.Queue()
        pending = [0]
        lock = threading.Lock()

        def add(item) -> None:
            with lock:
                pending[0] += 1
            work.put(item)

        def lister() -> None:
            while True:
                item = work.get()
                if item is None:
                    return
                try:
                    if not self._abort.is_set():
                        self._visit(*item, add)
                except BaseException as err:  # a fatal error: bad input, a NameNode gone
                    self._fail_job(err)
                finally:
                    with lock:
                        pending[0] -= 1
                        last = pending[0] == 0
                    if last:
                        for _ in range(self.options.list_threads):
                            work.put(None)

        for src, entry, target in roots:
            add((src, entry, target))
        threads = [threading.Thread(target=lister, name=f"distcp-list-{i}", daemon=True)
                   for i in range(self.options.list_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with self._lock:
            self._listing_done = True
            self._lock.notify_all()

    def _visit(self, src: Location, entry: Entry, target: str, add) -> None:
        if entry.is_dir:
            if self._skip_bad_name(src, target):
                return
            self.dst.mkdirs(target)
            with self._lock:
                self.counts["directories"] += 1
            for child in self._src(src).list(entry.path):
                add((Location(src.namenode, child.path), child, join(target, basename(child.path))))
            return
        self._plan_file(src, target)

    def _skip_bad_name(self, src: Location, target: str) -> bool:
        """A name that is not valid UTF-8 (a local file from a Latin-1 disk) cannot be a cluster
        path: that file is reported as failed and the others go on."""
        try:
            (src.path + target).encode("utf-8")
            return False
        except UnicodeEncodeError:
            shown = src.path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            with self._lock:
                self.counts["files_planned"] += 1
                self.counts["files_failed"] += 1
                self.failures.append(f"{shown}: invalid path: not valid UTF-8 (skipped)")
                self._lock.notify_all()
            log.warning("%s: not valid UTF-8, skipped", shown)
            return True

    def _plan_file(self, src: Location, target: str) -> None:
        if self._skip_bad_name(src, target):
            return
        side = self._src(src)
        entry = side.stat(src.path)  # with the identity that is checked again at commit
        if entry is None:
            raise NotFound(f"no such file: {src}")
        tkey = plan.key(target)
        marker = join(self.staging, tkey)
        planned_before = self.dst.stat(marker) is not None
        existing = self.dst.stat(target)
        overwrite = False
        if existing is not None:
            if existing.is_dir:
                raise UsageError(f"destination is a directory: {Location(self.destination.namenode, target)}")
            if self.options.update or planned_before:
                if existing.length == entry.length and self.dst.checksum(target) == side.checksum(src.path):
                    with self._lock:   # a killed run of this job finished it: resumed, not skipped
                        self.counts["files_resumed" if planned_before and not self.options.update else "files_skipped"] += 1
                    log.info("%s: same checksum at %s, skipped", src, target)
                    return
                overwrite = True
            elif self.options.overwrite:
                overwrite = True
            else:
                raise AlreadyExists(f"destination file exists: {Location(self.destination.namenode, target)} "
                                    f"(use -update or -overwrite)")
        self.dst.mkdirs(parent_of(target))
        self.dst.mkdirs(marker)
        job = FileJob(src, entry, target, overwrite, tkey, plan.key(*entry.identity))
        segment_size = self._segment_size(job, target)
        segments = plan.segments(entry.length, segment_size)
        job.states = [SegmentState(job, s) for s in segments]
        job.left = len(segments)
        self._resume(job, marker)
        job.reader = side.open(src.path)
        with self._lock:
            self.counts["files_planned"] += 1
            self.counts["bytes_planned"] += entry.length
            self.counts["segments_planned"] += len(segments)
        if job.left == 0:
            self._commit_later(job)
        for state in job.states:
            if not state.done:
                while not self._abort.is_set():
                    try:
                        self._segments.put(state, timeout=0.2)  # bounded: listing waits for the copiers
                        break
                    except queue.Full:
                        continue

    def _segment_size(self, job: FileJob, target: str) -> int:
        if self.dst_fs is None:
            return self.options.blocks_per_chunk * LOCAL_BLOCK
        directory = parent_of(target)
        with self._lock:
            answer = self._policies.get(directory)
        if answer is None:
            answer = self.dst_fs.get_policy(directory)
            with self._lock:
                self._policies[directory] = answer
        policy = parse_policy(self.options.policy or answer.policy)
        default_bs = answer.default_block_size
        job.policy, job.block_size = policy.name, layout.block_size_for(policy, default_bs)
        return self.options.blocks_per_chunk * layout.group_data_size(policy, job.block_size)

    def _part_name(self, job: FileJob, seq: int, n: int) -> str:
        # The run's own suffix: a killed run's part still being written (its lease not yet
        # expired) holds its name, and a path being written is refused to any other writer.
        return join(join(self.staging, job.tkey), f"{job.skey}-part-{seq:06d}-{n}-{_RUN}")

    def _resume(self, job: FileJob, marker: str) -> None:
        """Segments a killed run of this job finished are not copied again."""
        if self.dst_fs is None:
            self._resume_local(job, marker)
            return
        found: dict[int, str] = {}
        for e in self.dst.list(marker):
            name = basename(e.path)
            prefix, _, rest = name.partition("-part-")
            seq_text, _, _n = rest.partition("-")
            ok = prefix == job.skey and seq_text.isdigit() and int(seq_text) < len(job.states)
            if ok and int(seq_text) not in found and e.length == job.states[int(seq_text)].segment.length:
                found[int(seq_text)] = e.path
            else:
                self.dst_fs.delete(e.path, recursive=True)  # an older source, or a duplicate
        for seq, part in found.items():
            state = job.states[seq]
            state.done, state.resumed, state.part = True, True, part
            state.crc = self.dst_fs.checksum(part).crc
            job.left -= 1
            with self._lock:
                self.counts["segments_resumed"] += 1
                self.counts["bytes_resumed"] += state.segment.length

    def _resume_local(self, job: FileJob, marker: str) -> None:
        data_path = join(marker, f"{job.skey}.data")
        for name in os.listdir(marker):
            if not name.startswith(job.skey):
                os.unlink(join(marker, name))   # parts of an older version of the source
        job.local_fd = os.open(data_path, os.O_RDWR | os.O_CREAT, 0o644)
        os.ftruncate(job.local_fd, job.source.length)
        for state in job.states:
            done = join(marker, f"{job.skey}.done-{state.segment.seq:06d}")
            if os.path.exists(done):
                with open(done) as f:
                    state.crc = int(f.read().strip() or "0", 16)
                state.done, state.resumed = True, True
                job.left -= 1
                with self._lock:
                    self.counts["segments_resumed"] += 1
                    self.counts["bytes_resumed"] += state.segment.length

    # ------------------------------------------------------------------ copying

    def _copier(self) -> None:
        while True:
            state = self._segments.get()
            if state is None:
                return
            if self._abort.is_set() or state.file.failed:
                continue
            self._attempt(state, exclude=frozenset())

    def _attempt(self, state: SegmentState, exclude: frozenset[str]) -> None:
        job, seg = state.file, state.segment
        with self._lock:
            if self._abort.is_set() or job.failed or state.done:
                return
            n = len(state.attempts)
            attempt = Attempt(n, time.monotonic(), tuple(sorted(exclude)))
            attempt.overdue_at_start = job.reader.overdue() if n == 0 else {}
            attempt.stream = SegmentStream(job.reader, seg.offset, seg.length, exclude, self.options.read_step)
            state.attempts.append(attempt)
            if state not in self._running:
                self._running.append(state)
            self._lock.notify_all()
        try:
            if self.dst_fs is not None:
                attempt.part = self._part_name(job, seg.seq, n)
                self.dst_fs.write(attempt.part, attempt.stream, overwrite=True, policy=job.policy,
                                  block_size=job.block_size)
                self._check_part(attempt)
            else:
                self._write_local(job, seg, attempt.stream)
        except Cancelled:
            self._ended(state, attempt, "cancelled")
        except (HedgefsError, OSError) as err:
            self._ended(state, attempt, "failed", str(err))
        except BaseException as err:
            self._ended(state, attempt, "failed", str(err))
            raise
        else:
            self._ended(state, attempt, "finished")

    def _check_part(self, attempt: Attempt) -> None:
        """The part holds the bytes read: its checksum (from the DataNodes' stored chunk CRCs)
        equals the CRC of what passed through the stream."""
        stored = self.dst_fs.checksum(attempt.part)
        if (stored.crc, stored.length) != (attempt.stream.crc, attempt.stream.passed):
            raise HedgefsError(f"part {attempt.part} does not hold the bytes read: checksum {stored.crc:08x} "
                               f"({stored.length} bytes), read {attempt.stream.crc:08x} "
                               f"({attempt.stream.passed} bytes)")

    def _write_local(self, job: FileJob, seg: plan.Segment, stream: SegmentStream) -> None:
        pos = seg.offset
        while True:
            data = stream.read(self.options.read_step)
            if not data:
                break
            os.pwrite(job.local_fd, data, pos)
            pos += len(data)
        if stream.cancelled:
            raise Cancelled("cancelled")
        os.fdatasync(job.local_fd)
        # The segment's record for a rerun: written after its bytes are on disk, renamed into place.
        done = join(join(self.staging, job.tkey), f"{job.skey}.done-{seg.seq:06d}")
        with open(done + f".{threading.get_ident()}", "w") as f:
            f.write(f"{stream.crc:08x}")
        os.replace(done + f".{threading.get_ident()}", done)

    def _ended(self, state: SegmentState, attempt: Attempt, how: str, error: str = "") -> None:
        job = state.file
        delete_part = None
        commit = False
        retry = give_up = False
        with self._lock:
            attempt.ended = time.monotonic()
            attempt.error = error
            if how == "finished" and not state.done:
                attempt.outcome = "won"
                state.done, state.part, state.crc = True, attempt.part, attempt.stream.crc
                for other in state.attempts:
                    if other is not attempt and other.outcome == "running":
                        other.stream.cancel()
                if attempt.n > 0 and state.hedged:
                    self.counts["hedge_wins"] += 1
                self.delay.record(state.segment.length, attempt.ended - attempt.started)
                self.counts["segments"] += 1
                self.counts["bytes"] += state.segment.length
                self.done_segments.append(state)
                job.left -= 1
                commit = job.left == 0 and not job.failed
            elif how == "finished":
                attempt.outcome = "lost"
                delete_part = attempt.part
            else:
                attempt.outcome = how
                if how == "cancelled" and attempt.part is not None:
                    delete_part = None  # the writer abandoned it: nothing was ever visible
                others_running = any(a.outcome == "running" for a in state.attempts)
                if how == "failed" and not state.done and not others_running:
                    log.warning("%s segment %d copy %d failed: %s", job.source.path, state.segment.seq,
                                attempt.n, error)
                    retry = len(state.attempts) < _MAX_ATTEMPTS and not self._abort.is_set() and not job.failed
                    give_up = not retry
            if not any(a.outcome == "running" for a in state.attempts) and state in self._running:
                self._running.remove(state)
            self._lock.notify_all()
        if delete_part is not None:
            self._delete_quietly(delete_part)
        if retry or give_up:
            # A source replaced or deleted under us fails its reads: say so, and do not retry.
            changed = self._source_changed(job)
            with self._lock:
                if changed or give_up:
                    self._file_failed(job, changed or f"segment {state.segment.seq}: {error}")
                else:
                    self.counts["segments_retried"] += 1
            if not changed and retry:
                self._submit(self._attempt, state, frozenset())
        if commit:
            self._commit_later(job)

    def _delete_quietly(self, path: str) -> None:
        try:
            self.dst_fs.delete(path)
        except HedgefsError as err:
            log.info("could not delete %s (%s): the staging directory goes at the end anyway", path, err)

    def _file_failed(self, job: FileJob, why: str) -> None:
        """Under the lock: the file is reported as failed, the rest of the job goes on."""
        if job.failed:
            return
        job.failed = why
        self.counts["files_failed"] += 1
        self.failures.append(f"{job.source.path}: {why}")
        for state in job.states:
            for a in state.attempts:
                if a.outcome == "running":
                    a.stream.cancel()

    # ------------------------------------------------------------------ hedging

    def _coordinate(self, on_progress) -> None:
        """Start hedges when segments are late; return when everything is copied and committed."""
        last_progress = 0.0
        while True:
            with self._lock:
                if self._abort.is_set():
                    return
                c = self.counts
                if (self._listing_done and c["files"] + c["files_failed"] >= c["files_planned"]
                        and not self._running and all(f.done() for f in self._commits)):
                    return
                wait = self._hedge_late_segments()
            if on_progress and time.monotonic() - last_progress >= 0.2:
                last_progress = time.monotonic()
                on_progress(self.progress())
            with self._lock:
                self._lock.wait(timeout=min(wait, 0.2))

    def _hedge_late_segments(self) -> float:
        """Under the lock: start the hedges that are due; return seconds until the next may be."""
        if not self.options.hedging:
            return 1.0
        budget = plan.hedge_budget(self.options.max_hedged_percent, self.counts["segments_planned"])
        now = time.monotonic()
        soonest = 1.0
        for state in list(self._running):
            if state.done or state.hedged or state.file.failed or not state.attempts:
                continue
            first = state.attempts[0]
            delay = self.delay.delay_s(state.segment.length)
            if delay is None:
                continue
            due = first.started + delay
            if due > now:
                soonest = min(soonest, due - now)
                continue
            if self.counts["segments_hedged"] >= budget:
                return 1.0
            state.hedged = True
            self.counts["segments_hedged"] += 1
            baseline = first.overdue_at_start
            exclude = frozenset(dn for dn, n in state.file.reader.overdue().items() if n > baseline.get(dn, 0))
            log.info("hedging %s segment %d: not done after %.0f ms%s", state.file.source.path, state.segment.seq,
                     delay * 1000, f", reading around {', '.join(sorted(exclude))}" if exclude else "")
            # The second copy reads around the DataNodes whose reads went overdue since the first began.
            self._submit(self._attempt, state, exclude)
        return max(soonest, 0.01)

    def _submit(self, fn, *args) -> None:
        try:
            self._hedge_pool.submit(fn, *args)
        except RuntimeError:  # shut down: the job is ending
            pass

    # ------------------------------------------------------------------ commit

    def _commit_later(self, job: FileJob) -> None:
        with self._lock:
            self._commits.append(self._commit_pool.submit(self._commit, job))
            self._lock.notify_all()

    def _commit(self, job: FileJob) -> None:
        try:
            changed = self._source_changed(job)
            if changed:
                raise SourceChanged(changed)
            if self.dst_fs is not None:
                parts = [s.part for s in job.states]
                self.dst_fs.concat(job.target, parts, overwrite=job.overwrite)
            else:
                os.fsync(job.local_fd)
                os.close(job.local_fd)
                job.local_fd = None
                marker = join(self.staging, job.tkey)
                os.replace(join(marker, f"{job.skey}.data"), job.target)
            crc, length = combine_all((s.crc, s.segment.length) for s in job.states)
            log.info("committed %s (%d bytes, crc32c %08x)", job.target, length, crc)
            with self._lock:
                self.counts["files"] += 1
        except (HedgefsError, OSError) as err:
            with self._lock:
                self._file_failed(job, str(err))
        finally:
            if job.local_fd is not None:
                os.close(job.local_fd)
                job.local_fd = None
            if job.reader is not None:
                job.reader.close()
            with self._lock:
                self._lock.notify_all()

    def _source_changed(self, job: FileJob) -> str:
        """Why the source file is not the one planned ("" if it is)."""
        try:
            now = self._src(job.src).stat(job.source.path)
        except (HedgefsError, OSError) as err:
            return f"cannot check the source: {err}"
        if now is None:
            return "the source was deleted during the copy"
        if now.identity != job.source.identity:
            return "the source changed during the copy (its length, mtime or blocks differ)"
        return ""

    def _remove_staging(self) -> None:
        try:
            if self.dst_fs is not None:
                self.dst_fs.delete(self.staging, recursive=True)
            else:
                import shutil
                shutil.rmtree(self.staging, ignore_errors=True)
        except HedgefsError as err:
            log.warning("could not remove the staging directory %s: %s", self.staging, err)

    # ------------------------------------------------------------------ reporting

    def progress(self) -> dict:
        with self._lock:
            c = dict(self.counts)
        c["seconds"] = time.monotonic() - self.t0
        c["listing_done"] = self._listing_done
        return c

    def report(self) -> dict:
        seconds = time.monotonic() - self.t0
        with self._lock:
            c = dict(self.counts)
            segments = []
            for s in sorted(self.done_segments, key=lambda s: s.attempts[0].started):
                segments.append({
                    "file": s.file.source.path, "seq": s.segment.seq, "offset": s.segment.offset,
                    "bytes": s.segment.length, "hedged": s.hedged,
                    "attempts": [{"n": a.n, "start_s": round(a.started - self.t0, 4),
                                  "end_s": None if a.ended is None else round(a.ended - self.t0, 4),
                                  "outcome": a.outcome, "exclude": list(a.exclude), "error": a.error}
                                 for a in s.attempts],
                    "seconds": round(max(a.ended for a in s.attempts if a.outcome == "won") - s.attempts[0].started, 4),
                })
        copied = c["bytes"]
        return {
            "job": self.id, "files": c["files"], "files_skipped": c["files_skipped"], "files_failed": c["files_failed"],
            "directories": c["directories"], "bytes": copied, "segments": c["segments"],
            "segments_resumed": c["segments_resumed"], "bytes_resumed": c["bytes_resumed"],
            "segments_hedged": c["segments_hedged"],
            "hedge_wins": c["hedge_wins"], "segments_retried": c["segments_retried"],
            "seconds": round(seconds, 3), "mb_per_s": round(copied / 1e6 / seconds, 2) if seconds > 0 else 0.0,
            "failures": list(self.failures), "per_segment": segments,
        }


def _is_under(path: str, ancestor: str, local: bool) -> bool:
    if local:
        path, ancestor = os.path.realpath(path), os.path.realpath(ancestor)
    return path == ancestor or ancestor == "/" or path.startswith(ancestor.rstrip("/") + "/")
