"""Listing and planning: where each source goes, the walk of the source trees, and each file's plan.

    resolve      (source, entry, target) per source: Hadoop's rules, fixed by the first run in job.json
    list_all     --list-threads listers walk the sources; directories are made at the destination
    _plan_file   -update, -overwrite and resume decided by checksum; the file cut into segments of
                 whole destination block groups, queued (bounded) for the copiers

Every function takes the job (``DistCp``, job.py) and keeps its counts under its lock.
"""

from __future__ import annotations

import logging
import os
import queue
import threading

from hedgefs.client.errors import AlreadyExists, NotAllowed, NotFound, UsageError
from hedgefs.distcp import commit, plan, resume
from hedgefs.distcp.sides import Entry, Location, basename, join, parent_of
from hedgefs.distcp.state import FileJob, SegmentState
from hedgefs.ec import layout
from hedgefs.ec.policy import parse_policy

log = logging.getLogger("hedgefs.distcp")

LOCAL_BLOCK = 128 * 1024 * 1024   # a segment's "block" when the destination is a local disk


def resolve(cp) -> list[tuple[Location, Entry, str]]:
    """(source, its entry, its target path) per source; fixed by the first run in job.json."""
    entries = []
    for src in cp.sources:
        entry = cp.source_side(src).stat(src.path)
        if entry is None:
            hint = f" (a local file? use file://{src.path})" if not src.is_local and os.path.exists(src.path) else ""
            raise NotFound(f"no such file or directory: {src}{hint}")
        entries.append(entry)
    manifest = resume.read_manifest(cp)
    if manifest is not None:
        targets = manifest["targets"]
    else:
        dst_entry = cp.dst.stat(cp.destination.path)
        dst_is_dir = dst_entry is not None and dst_entry.is_dir
        if len(cp.sources) > 1 and dst_entry is not None and not dst_is_dir:
            raise UsageError(f"copying {len(cp.sources)} sources needs a directory as destination: "
                             f"{cp.destination} is a file")
        targets = [_target_root(cp, s, e, dst_is_dir) for s, e in zip(cp.sources, entries)]
    roots = []
    for src, entry, target in zip(cp.sources, entries, targets):
        if src.namenode == cp.destination.namenode and _is_under(target, src.path, src.is_local):
            if entry.is_dir:
                raise UsageError(f"cannot copy directory {src} into itself: {Location(src.namenode, target)}")
            if target == src.path:
                raise UsageError(f"source and destination are the same file: {src}")
        roots.append((src, entry, target))
    if manifest is None:
        cp.dst.mkdirs(parent_of(cp.destination.path))
        cp.dst.mkdirs(cp.staging)
        resume.write_manifest(cp, {"sources": [str(s) for s in cp.sources],
                                   "destination": str(cp.destination), "targets": targets})
    return roots


def _target_root(cp, src: Location, entry: Entry, dst_is_dir: bool) -> str:
    """Hadoop's rules: SRC goes into an existing DST directory (or into DST when there are
    several sources), else it becomes DST; with -update or -overwrite a directory's contents go
    to DST itself, so that running the same command again compares like with like."""
    if entry.is_dir and (cp.options.update or cp.options.overwrite):
        return cp.destination.path
    if (dst_is_dir or len(cp.sources) > 1) and src.path != "/":
        return join(cp.destination.path, basename(src.path))
    return cp.destination.path


def list_all(cp, roots) -> None:
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
                if not cp.abort.is_set():
                    _visit(cp, *item, add)
            except BaseException as err:
                if refused_here(err):   # this entry only: reported, the rest goes on
                    _skip_refused(cp, item[0], err)
                else:                   # a fatal error: bad input, a NameNode gone, a credential refused
                    cp.fail_job(err)
            finally:
                with lock:
                    pending[0] -= 1
                    last = pending[0] == 0
                if last:
                    for _ in range(cp.options.list_threads):
                        work.put(None)

    for src, entry, target in roots:
        add((src, entry, target))
    threads = [threading.Thread(target=lister, name=f"distcp-list-{i}", daemon=True)
               for i in range(cp.options.list_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with cp.lock:
        cp.listing_done = True
        cp.lock.notify_all()


def _visit(cp, src: Location, entry: Entry, target: str, add) -> None:
    if entry.is_dir:
        if _skip_bad_name(cp, src, target):
            return
        children = cp.source_side(src).list(entry.path)   # first: one we may not read leaves no empty copy
        cp.dst.mkdirs(target)
        with cp.lock:
            cp.counts["directories"] += 1
        for child in children:
            add((Location(src.namenode, child.path), child, join(target, basename(child.path))))
        return
    _plan_file(cp, src, target)


def _skip_bad_name(cp, src: Location, target: str) -> bool:
    """A name that is not valid UTF-8 (a local file from a Latin-1 disk) cannot be a cluster
    path: that file is reported as failed and the others go on."""
    try:
        (src.path + target).encode("utf-8")
        return False
    except UnicodeEncodeError:
        shown = src.path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        with cp.lock:
            cp.counts["files_planned"] += 1
            cp.counts["files_failed"] += 1
            cp.failures.append(f"{shown}: invalid path: not valid UTF-8 (skipped)")
            cp.lock.notify_all()
        log.warning("%s: not valid UTF-8, skipped", shown)
        return True


def refused_here(err: BaseException) -> bool:
    """Whether ``err`` refuses this path only (skipped, exit 1): a local PermissionError, or the
    NameNode's PERMISSION_DENIED of a path for its owner and mode, whose messages all start
    "permission denied:" (namenode/permissions.py). Any other NotAllowed (UNAUTHENTICATED: a
    credential refused; a TLS refusal; an RPC the credential may not call) refuses every other
    path as well: it stops the job (exit 4) rather than skip all that is left."""
    if isinstance(err, PermissionError):
        return True
    return isinstance(err, NotAllowed) and str(err).startswith("permission denied:")


def _skip_refused(cp, src: Location, err: BaseException) -> None:
    """A file or directory the credential may not read (or whose copy it may not write): that
    entry is reported as failed, with the reason, and the others go on (exit 1 at the end)."""
    shown = src.path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    why = "permission denied" if isinstance(err, PermissionError) else str(err)
    with cp.lock:
        cp.counts["files_planned"] += 1
        cp.counts["files_failed"] += 1
        cp.failures.append(f"{shown}: {why} (skipped)")
        cp.lock.notify_all()
    log.warning("%s: %s, skipped", shown, why)


def _plan_file(cp, src: Location, target: str) -> None:
    if _skip_bad_name(cp, src, target):
        return
    side = cp.source_side(src)
    entry = side.stat(src.path)  # with the identity that is checked again at commit
    if entry is None:
        raise NotFound(f"no such file: {src}")
    reader = side.open(src.path)   # before anything is made for it: a file we may not read leaves nothing
    try:
        _plan_opened(cp, src, target, side, entry, reader)
    except BaseException:
        reader.close()
        raise


def _plan_opened(cp, src: Location, target: str, side, entry: Entry, reader) -> None:
    tkey = plan.key(target)
    marker = join(cp.staging, tkey)
    planned_before = cp.dst.stat(marker) is not None
    existing = cp.dst.stat(target)
    overwrite = False
    if existing is not None:
        if existing.is_dir:
            raise UsageError(f"destination is a directory: {Location(cp.destination.namenode, target)}")
        if cp.options.update or planned_before:
            if existing.length == entry.length and cp.dst.checksum(target) == side.checksum(src.path):
                with cp.lock:   # a killed run of this job finished it: resumed, not skipped
                    cp.counts["files_resumed" if planned_before and not cp.options.update else "files_skipped"] += 1
                log.info("%s: same checksum at %s, skipped", src, target)
                reader.close()
                return
            overwrite = True
        elif cp.options.overwrite:
            overwrite = True
        else:
            raise AlreadyExists(f"destination file exists: {Location(cp.destination.namenode, target)} "
                                f"(use -update or -overwrite)")
    cp.dst.mkdirs(parent_of(target))
    cp.dst.mkdirs(marker)
    job = FileJob(src, entry, target, overwrite, tkey, plan.key(*entry.identity))
    segment_size = _segment_size(cp, job, target)
    segments = plan.segments(entry.length, segment_size)
    job.states = [SegmentState(job, s) for s in segments]
    job.left = len(segments)
    resume.resume(cp, job, marker)
    job.reader = reader
    with cp.lock:
        cp.counts["files_planned"] += 1
        cp.counts["bytes_planned"] += entry.length
        cp.counts["segments_planned"] += len(segments)
    if job.left == 0:
        commit.commit_later(cp, job)
    for state in job.states:
        if not state.done:
            while not cp.abort.is_set():
                try:
                    cp.todo.put(state, timeout=0.2)  # bounded: listing waits for the copiers
                    break
                except queue.Full:
                    continue


def _segment_size(cp, job: FileJob, target: str) -> int:
    if cp.dst_fs is None:
        return cp.options.blocks_per_chunk * LOCAL_BLOCK
    directory = parent_of(target)
    with cp.lock:
        answer = cp.policies.get(directory)
    if answer is None:
        answer = cp.dst_fs.get_policy(directory)
        with cp.lock:
            cp.policies[directory] = answer
    policy = parse_policy(cp.options.policy or answer.policy)
    default_bs = answer.default_block_size
    job.policy, job.block_size = policy.name, layout.block_size_for(policy, default_bs)
    return cp.options.blocks_per_chunk * layout.group_data_size(policy, job.block_size)


def _is_under(path: str, ancestor: str, local: bool) -> bool:
    if local:
        path, ancestor = os.path.realpath(path), os.path.realpath(ancestor)
    return path == ancestor or ancestor == "/" or path.startswith(ancestor.rstrip("/") + "/")
