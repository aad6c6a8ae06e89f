"""What lets a killed job resume: job.json, the parts' names, the parts a killed run finished, the staging.

Staging lives beside the destination, ``<parent of DST>/.distcp-<job id>/``: ``job.json`` (where
each source goes, fixed by the first run), and one directory per target (its presence means this
job may write that target) holding the parts, named by the source file's identity and the segment.
Every function takes the job (``DistCp``, job.py).
"""

from __future__ import annotations

import json
import logging
import os

from hedgefs.client.errors import HedgefsError, NotFound
from hedgefs.distcp.sides import basename, join
from hedgefs.distcp.state import FileJob

log = logging.getLogger("hedgefs.distcp")
_RUN = os.urandom(4).hex()   # this process's run of a job: part names of its own


def read_manifest(cp) -> dict | None:
    path = join(cp.staging, "job.json")
    try:
        if cp.dst_fs is not None:
            return json.loads(cp.dst_fs.read_bytes(path))
        with open(path, "rb") as f:
            return json.loads(f.read())
    except (NotFound, FileNotFoundError):
        return None


def write_manifest(cp, doc: dict) -> None:
    data = json.dumps(doc).encode()
    path = join(cp.staging, "job.json")
    if cp.dst_fs is not None:
        cp.dst_fs.write_bytes(path, data, overwrite=True, policy=cp.options.policy)
    else:
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


def part_name(cp, job: FileJob, seq: int, n: int) -> str:
    # The run's own suffix: a killed run's part still being written (its lease not yet
    # expired) holds its name, and a path being written is refused to any other writer.
    return join(join(cp.staging, job.tkey), f"{job.skey}-part-{seq:06d}-{n}-{_RUN}")


def resume(cp, job: FileJob, marker: str) -> None:
    """Segments a killed run of this job finished are not copied again."""
    if cp.dst_fs is None:
        _resume_local(cp, job, marker)
        return
    found: dict[int, str] = {}
    for e in cp.dst.list(marker):
        name = basename(e.path)
        prefix, _, rest = name.partition("-part-")
        seq_text, _, _n = rest.partition("-")
        ok = prefix == job.skey and seq_text.isdigit() and int(seq_text) < len(job.states)
        if ok and int(seq_text) not in found and e.length == job.states[int(seq_text)].segment.length:
            found[int(seq_text)] = e.path
        else:
            cp.dst_fs.delete(e.path, recursive=True)  # an older source, or a duplicate
    for seq, part in found.items():
        state = job.states[seq]
        state.done, state.resumed, state.part = True, True, part
        state.crc = cp.dst_fs.checksum(part).crc
        job.left -= 1
        with cp.lock:
            cp.counts["segments_resumed"] += 1
            cp.counts["bytes_resumed"] += state.segment.length


def _resume_local(cp, job: FileJob, marker: str) -> None:
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
            with cp.lock:
                cp.counts["segments_resumed"] += 1
                cp.counts["bytes_resumed"] += state.segment.length


def remove_staging(cp) -> None:
    try:
        if cp.dst_fs is not None:
            cp.dst_fs.delete(cp.staging, recursive=True)
        else:
            import shutil
            shutil.rmtree(cp.staging, ignore_errors=True)
    except HedgefsError as err:
        log.warning("could not remove the staging directory %s: %s", cp.staging, err)
