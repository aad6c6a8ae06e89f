"""Copying: each segment read from the source (hedged reads) into a part of its own, then checked.

An attempt writes its segment as a part in the staging directory (a cluster destination) or into
the file's temp file (a local one); the first attempt of a segment to finish wins, the others are
cancelled and their parts deleted; a failed one is retried up to _MAX_ATTEMPTS copies in all.
Every function takes the job (``DistCp``, job.py).
"""

from __future__ import annotations

import logging
import os
import threading
import time

from hedgefs.client.errors import HedgefsError
from hedgefs.distcp import commit, plan, resume
from hedgefs.distcp.sides import join
from hedgefs.distcp.state import Attempt, FileJob, SegmentState
from hedgefs.distcp.stream import Cancelled, SegmentStream

log = logging.getLogger("hedgefs.distcp")

_MAX_ATTEMPTS = 3                  # copies of one segment: the first, a hedge, a retry after failure


def run_copier(cp) -> None:
    """A copier thread: copy the queued segments one at a time until a None comes."""
    while True:
        state = cp.todo.get()
        if state is None:
            return
        if cp.abort.is_set() or state.file.failed:
            continue
        run_attempt(cp, state, exclude=frozenset())


def run_attempt(cp, state: SegmentState, exclude: frozenset[str]) -> None:
    job, seg = state.file, state.segment
    with cp.lock:
        if cp.abort.is_set() or job.failed or state.done:
            return
        n = len(state.attempts)
        attempt = Attempt(n, time.monotonic(), tuple(sorted(exclude)))
        attempt.overdue_at_start = job.reader.overdue() if n == 0 else {}
        attempt.stream = SegmentStream(job.reader, seg.offset, seg.length, exclude, cp.options.read_step)
        state.attempts.append(attempt)
        if state not in cp.running:
            cp.running.append(state)
        cp.lock.notify_all()
    try:
        if cp.dst_fs is not None:
            attempt.part = resume.part_name(cp, job, seg.seq, n)
            cp.dst_fs.write(attempt.part, attempt.stream, overwrite=True, policy=job.policy,
                            block_size=job.block_size)
            _check_part(cp, attempt)
        else:
            _write_local(cp, job, seg, attempt.stream)
    except Cancelled:
        _ended(cp, state, attempt, "cancelled")
    except (HedgefsError, OSError) as err:
        _ended(cp, state, attempt, "failed", str(err))
    except BaseException as err:
        _ended(cp, state, attempt, "failed", str(err))
        raise
    else:
        _ended(cp, state, attempt, "finished")


def _check_part(cp, attempt: Attempt) -> None:
    """The part holds the bytes read: its checksum (from the DataNodes' stored chunk CRCs)
    equals the CRC of what passed through the stream."""
    stored = cp.dst_fs.checksum(attempt.part)
    if (stored.crc, stored.length) != (attempt.stream.crc, attempt.stream.passed):
        raise HedgefsError(f"part {attempt.part} does not hold the bytes read: checksum {stored.crc:08x} "
                           f"({stored.length} bytes), read {attempt.stream.crc:08x} "
                           f"({attempt.stream.passed} bytes)")


def _write_local(cp, job: FileJob, seg: plan.Segment, stream: SegmentStream) -> None:
    pos = seg.offset
    while True:
        data = stream.read(cp.options.read_step)
        if not data:
            break
        os.pwrite(job.local_fd, data, pos)
        pos += len(data)
    if stream.cancelled:
        raise Cancelled("cancelled")
    os.fdatasync(job.local_fd)
    # The segment's record for a rerun: written after its bytes are on disk, renamed into place.
    done = join(join(cp.staging, job.tkey), f"{job.skey}.done-{seg.seq:06d}")
    with open(done + f".{threading.get_ident()}", "w") as f:
        f.write(f"{stream.crc:08x}")
    os.replace(done + f".{threading.get_ident()}", done)


def _ended(cp, state: SegmentState, attempt: Attempt, how: str, error: str = "") -> None:
    job = state.file
    delete_part = None
    ready = False
    retry = give_up = False
    with cp.lock:
        attempt.ended = time.monotonic()
        attempt.error = error
        if how == "finished" and not state.done:
            attempt.outcome = "won"
            state.done, state.part, state.crc = True, attempt.part, attempt.stream.crc
            for other in state.attempts:
                if other is not attempt and other.outcome == "running":
                    other.stream.cancel()
            if attempt.n > 0 and state.hedged:
                cp.counts["hedge_wins"] += 1
            cp.delay.record(state.segment.length, attempt.ended - attempt.started)
            cp.counts["segments"] += 1
            cp.counts["bytes"] += state.segment.length
            cp.done_segments.append(state)
            job.left -= 1
            ready = job.left == 0 and not job.failed
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
                retry = len(state.attempts) < _MAX_ATTEMPTS and not cp.abort.is_set() and not job.failed
                give_up = not retry
        if not any(a.outcome == "running" for a in state.attempts) and state in cp.running:
            cp.running.remove(state)
        cp.lock.notify_all()
    if delete_part is not None:
        _delete_quietly(cp, delete_part)
    if retry or give_up:
        # A source replaced or deleted under us fails its reads: say so, and do not retry.
        changed = commit.source_changed(cp, job)
        with cp.lock:
            if changed or give_up:
                commit.file_failed(cp, job, changed or f"segment {state.segment.seq}: {error}")
            else:
                cp.counts["segments_retried"] += 1
        if not changed and retry:
            cp.submit(run_attempt, cp, state, frozenset())
    if ready:
        commit.commit_later(cp, job)


def _delete_quietly(cp, path: str) -> None:
    try:
        cp.dst_fs.delete(path)
    except HedgefsError as err:
        log.info("could not delete %s (%s): the staging directory goes at the end anyway", path, err)
