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
import logging
import os
import queue
import threading
import time

from hedgefs.client.errors import UsageError
from hedgefs.client.fs import FileSystem
from hedgefs.distcp import copier, listing, plan, resume
from hedgefs.distcp.sides import Location, join, parent_of
from hedgefs.distcp.state import SegmentState

log = logging.getLogger("hedgefs.distcp")


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


class DistCp:
    """One copy job. Its parts are listing.py (where things go, the walk, each file's plan), resume.py
    (job.json, part names, what a killed run finished), copier.py (attempts) and commit.py; each takes
    this object and shares its counts and queues under its one Condition. The job itself runs the
    threads, coordinates and hedges late segments, and reports."""

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
        self.lock = threading.Condition()
        self.todo: queue.Queue = queue.Queue(maxsize=max(4, 2 * options.workers))
        self.abort = threading.Event()
        self._fatal: BaseException | None = None
        self.listing_done = False
        self.running: list[SegmentState] = []
        self.commits: list[concurrent.futures.Future] = []
        self.t0 = time.monotonic()
        self.counts = dict(files=0, files_skipped=0, files_resumed=0, files_failed=0, bytes=0, bytes_resumed=0, bytes_planned=0,
                           files_planned=0,
                           segments=0, segments_planned=0, segments_resumed=0, segments_hedged=0, hedge_wins=0,
                           segments_retried=0, directories=0)
        self.failures: list[str] = []
        self.policies: dict = {}   # destination directory -> its GetPolicy answer
        self.done_segments: list[SegmentState] = []
        self._hedge_pool = concurrent.futures.ThreadPoolExecutor(options.workers, thread_name_prefix="distcp-hedge")
        self.commit_pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="distcp-commit")

    # ------------------------------------------------------------------ the whole job

    def run(self, on_progress=None) -> dict:
        roots = listing.resolve(self)
        lister = threading.Thread(target=listing.list_all, args=(self, roots), name="distcp-list", daemon=True)
        copiers = [threading.Thread(target=copier.run_copier, args=(self,), name=f"distcp-copy-{i}", daemon=True)
                   for i in range(self.options.workers)]
        lister.start()
        for t in copiers:
            t.start()
        try:
            self._coordinate(on_progress)
        except BaseException:
            self._stop()
            raise
        finally:
            lister.join(timeout=30)
            for _ in copiers:
                self._put_forced(None)
            for t in copiers:
                t.join(timeout=30)
            concurrent.futures.wait(self.commits)
            self._hedge_pool.shutdown(wait=True, cancel_futures=True)
            self.commit_pool.shutdown(wait=True)
        if self._fatal is not None:
            if isinstance(self._fatal, UsageError):
                resume.remove_staging(self)   # refused for bad input: the same command can never resume it
            raise self._fatal
        if not self.failures:
            resume.remove_staging(self)
        return self.report()

    def _stop(self) -> None:
        self.abort.set()
        with self.lock:
            for state in self.running:
                for a in state.attempts:
                    if a.stream is not None:
                        a.stream.cancel()
            self.lock.notify_all()

    def fail_job(self, err: BaseException) -> None:
        with self.lock:
            if self._fatal is None:
                self._fatal = err
        self._stop()

    def _put_forced(self, item) -> None:
        """Queue a sentinel even if the queue is full of segments nobody will copy (abort)."""
        while True:
            try:
                self.todo.put(item, timeout=0.1)
                return
            except queue.Full:
                try:
                    self.todo.get_nowait()
                except queue.Empty:
                    pass

    def source_side(self, location: Location):
        return self.src_sides[location.namenode]

    # ------------------------------------------------------------------ hedging

    def _coordinate(self, on_progress) -> None:
        """Start hedges when segments are late; return when everything is copied and committed."""
        last_progress = 0.0
        while True:
            with self.lock:
                if self.abort.is_set():
                    return
                c = self.counts
                if (self.listing_done and c["files"] + c["files_failed"] >= c["files_planned"]
                        and not self.running and all(f.done() for f in self.commits)):
                    return
                wait = self._hedge_late_segments()
            if on_progress and time.monotonic() - last_progress >= 0.2:
                last_progress = time.monotonic()
                on_progress(self.progress())
            with self.lock:
                self.lock.wait(timeout=min(wait, 0.2))

    def _hedge_late_segments(self) -> float:
        """Under the lock: start the hedges that are due; return seconds until the next may be."""
        if not self.options.hedging:
            return 1.0
        budget = plan.hedge_budget(self.options.max_hedged_percent, self.counts["segments_planned"])
        now = time.monotonic()
        soonest = 1.0
        for state in list(self.running):
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
            self.submit(copier.run_attempt, self, state, exclude)
        return max(soonest, 0.01)

    def submit(self, fn, *args) -> None:
        try:
            self._hedge_pool.submit(fn, *args)
        except RuntimeError:  # shut down: the job is ending
            pass

    # ------------------------------------------------------------------ reporting

    def progress(self) -> dict:
        with self.lock:
            c = dict(self.counts)
        c["seconds"] = time.monotonic() - self.t0
        c["listing_done"] = self.listing_done
        return c

    def report(self) -> dict:
        seconds = time.monotonic() - self.t0
        with self.lock:
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

