"""Committing: when a file's segments are all in, check the source did not change, then concat the
parts into the target (one NameNode transaction), or rename the finished temp file into place for
a local destination. A file that cannot be copied is reported as failed here, and the job goes on.
Every function takes the job (``DistCp``, job.py).
"""

from __future__ import annotations

import logging
import os

from hedgefs.client.errors import HedgefsError
from hedgefs.distcp.sides import join
from hedgefs.distcp.state import FileJob
from hedgefs.distcp.stream import SourceChanged
from hedgefs.ec.crc import combine_all

log = logging.getLogger("hedgefs.distcp")


def commit_later(cp, job: FileJob) -> None:
    with cp.lock:
        cp.commits.append(cp.commit_pool.submit(_commit, cp, job))
        cp.lock.notify_all()


def _commit(cp, job: FileJob) -> None:
    try:
        changed = source_changed(cp, job)
        if changed:
            raise SourceChanged(changed)
        if cp.dst_fs is not None:
            parts = [s.part for s in job.states]
            cp.dst_fs.concat(job.target, parts, overwrite=job.overwrite)
        else:
            os.fsync(job.local_fd)
            os.close(job.local_fd)
            job.local_fd = None
            marker = join(cp.staging, job.tkey)
            os.replace(join(marker, f"{job.skey}.data"), job.target)
        crc, length = combine_all((s.crc, s.segment.length) for s in job.states)
        log.info("committed %s (%d bytes, crc32c %08x)", job.target, length, crc)
        with cp.lock:
            cp.counts["files"] += 1
    except (HedgefsError, OSError) as err:
        with cp.lock:
            file_failed(cp, job, str(err))
    finally:
        if job.local_fd is not None:
            os.close(job.local_fd)
            job.local_fd = None
        if job.reader is not None:
            job.reader.close()
        with cp.lock:
            cp.lock.notify_all()


def source_changed(cp, job: FileJob) -> str:
    """Why the source file is not the one planned ("" if it is)."""
    try:
        now = cp.source_side(job.src).stat(job.source.path)
    except (HedgefsError, OSError) as err:
        return f"cannot check the source: {err}"
    if now is None:
        return "the source was deleted during the copy"
    if now.identity != job.source.identity:
        return "the source changed during the copy (its length, mtime or blocks differ)"
    return ""


def file_failed(cp, job: FileJob, why: str) -> None:
    """Under the lock: the file is reported as failed, the rest of the job goes on."""
    if job.failed:
        return
    job.failed = why
    cp.counts["files_failed"] += 1
    cp.failures.append(f"{job.source.path}: {why}")
    for state in job.states:
        for a in state.attempts:
            if a.outcome == "running":
                a.stream.cancel()
