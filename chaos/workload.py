"""Chaos: the load that runs all along, writers putting, appending to, truncating and deleting
files, readers reading ranges. With --ha the writers put files into directories of ``BATCH`` and
delete the oldest directory whole (recursive: one journal record, the groups freed in the
background, across failovers).

Every version of a file (put, appended to, truncated) is a prefix of one seeded stream of its own
(``file_content`` is prefix-stable), so a reader whose expectation is one version behind the file
it opened still knows every byte it gets: a range of a version of another length is checked
against the prefix it has (see ``reader``).

Every function takes the run's ``Chaos`` object (runner.py). A writer records each file whose put
returned in ``chaos.files``; that is what the invariant (invariant.py) checks; and every put and
delete, with its outcome, in ``chaos.journal`` (namespace.py). A reader checks the
bytes of every range it reads.
"""

from __future__ import annotations

import hashlib
import random
import time
import traceback
from collections import deque
from typing import Callable

from hedgefs.chaos import namespace
from hedgefs.chaos.common import StoredFile
from hedgefs.chaos.invariant import common_prefix, compare, count_clean_failure, stored
from hedgefs.chaos.schedule import POLICY, REPLICATED, file_content, file_size
from hedgefs.client.errors import HedgefsError
from hedgefs.client.fs import FileSystem


BATCH = 4   # --ha: a writer's files per directory; the oldest directory goes whole (a recursive delete)


def writer(chaos, fs: FileSystem, w: int) -> None:
    rng = random.Random(f"hedgefs-chaos/{chaos.config.seed}/writer/{w}")
    mine: deque[str] = deque()
    batches: deque[tuple[str, list[str]]] = deque()   # --ha: (directory, every path a put was tried at)
    index = 0
    while not chaos.stop.is_set():
        if chaos.config.ha and len(batches) > 1 and sum(len(t) for _, t in batches) >= chaos.config.files_per_writer:
            _delete_batch(chaos, fs, w, *batches.popleft())
        elif len(mine) >= chaos.config.files_per_writer:
            old = mine.popleft()
            with chaos.lock:
                chaos.files.pop(old, None)
            namespace.record(chaos, "delete", old, _quietly(chaos, lambda: fs.delete(old), f"writer {w}: delete {old}"))
        if not chaos.config.ha and mine and rng.random() < CHANGE_SHARE:
            change(chaos, fs, w, rng, rng.choice(list(mine)))
            chaos.stop.wait(rng.uniform(0.5, 2.0))
            continue
        data = file_content(chaos.config.seed, w, index, file_size(rng, chaos.config.max_file_bytes))
        path = f"/chaos/w{w}/f{index:05d}"
        if chaos.config.ha:   # a recursive delete: one record, the groups freed after (namenode/blocks/collector.py)
            if index % BATCH == 0:
                directory = f"/chaos/w{w}/b{index // BATCH:04d}"
                batches.append((directory, []))
                _quietly(chaos, lambda: fs.mkdir(directory, parents=True), f"writer {w}: mkdir {directory}")
            path = f"{batches[-1][0]}/f{index:05d}"
            batches[-1][1].append(path)
        policy = REPLICATED.name if index % 2 else None   # None: the cluster's RS-6-3
        index += 1
        err = _quietly(chaos, lambda: fs.write_bytes(path, data, policy=policy), f"writer {w}: put {path}")
        namespace.record(chaos, "put", path, err, len(data))
        if err is None:
            with chaos.lock:
                chaos.files[path] = StoredFile(path, data, hashlib.sha256(data).hexdigest(), chaos.step)
                chaos.report.files += 1
            if not chaos.config.ha:
                mine.append(path)
        else:
            with chaos.lock:
                chaos.write_failures += 1
            chaos.stop.wait(0.2)
        chaos.stop.wait(rng.uniform(0.5, 2.0))


CHANGE_SHARE = 0.3   # of a writer's turns (not --ha): an append to or a truncate of one of its files


def change(chaos, fs: FileSystem, w: int, rng: random.Random, path: str) -> None:
    """Append to ``path`` (the next bytes of its stream) or truncate it; the new version is what
    the readers and the final check expect once it returned. An outcome not known (the NameNode
    went away) takes the file out of the byte checks (the namespace check allows either length)."""
    with chaos.lock:
        f = chaos.files.get(path)
    if f is None:
        return
    w_index = int(path.rsplit("/f", 1)[1])
    if rng.random() < 0.6:
        op, size = "append", len(f.data) + file_size(rng, chaos.config.max_file_bytes // 2)
        data = file_content(chaos.config.seed, w, w_index, size)

        def act():   # half of them in pieces, each hsynced: every hsync's version is the file's from then on
            pieces = min(rng.randrange(4), size - len(f.data) - 1) if rng.random() < 0.5 else 0
            cuts = sorted(rng.sample(range(len(f.data) + 1, size), max(0, pieces)))
            with fs.append(path) as out:
                at = len(f.data)
                for cut in cuts:
                    out.write(data[at:cut])
                    out.hsync()
                    at = cut
                    synced(chaos, path, data[:cut])
                out.write(data[at:])
    else:
        op, size = "truncate", rng.randrange(len(f.data) + 1)
        data = f.data[:size]

        def act():
            fs.truncate(path, size)
    with chaos.lock:
        chaos.changing.add(path)
    err = _quietly(chaos, act, f"writer {w}: {op} {path} to {size}")
    namespace.record(chaos, op, path, err, size)
    with chaos.lock:
        chaos.changing.discard(path)
        if err is None:
            chaos.files[path] = StoredFile(path, data, hashlib.sha256(data).hexdigest(), chaos.step)
            if op == "append":
                chaos.report.appends += 1
            else:
                chaos.report.truncates += 1
        elif namespace.outcome(err) == "unknown":
            chaos.files.pop(path, None)
        else:
            chaos.write_failures += 1


def synced(chaos, path: str, data: bytes) -> None:
    """An hsync of an append returned: this prefix is the file's (acknowledged), whatever follows."""
    namespace.record(chaos, "append", path, None, len(data))
    with chaos.lock:
        chaos.files[path] = StoredFile(path, data, hashlib.sha256(data).hexdigest(), chaos.step)
        chaos.report.hsyncs += 1


def _delete_batch(chaos, fs: FileSystem, w: int, directory: str, tried: list[str]) -> None:
    """--ha: delete a directory of this writer's, recursively: every put tried in it is deleted
    with the outcome of that one call."""
    with chaos.lock:
        for path in tried:
            chaos.files.pop(path, None)
    err = _quietly(chaos, lambda: fs.delete(directory, recursive=True), f"writer {w}: delete -r {directory}")
    for path in tried:
        namespace.record(chaos, "delete", path, err)


def _quietly(chaos, action: Callable[[], object], what: str) -> BaseException | None:
    """Run a put or delete: None if it returned, else its error; a clean failure (a HedgefsError)
    is fine, anything else is noted."""
    try:
        action()
        return None
    except HedgefsError as err:
        return err
    except Exception as err:  # noqa: BLE001 - not a crash of ours: a finding to report
        note = f"{what} raised {traceback.format_exc().strip().splitlines()[-1]} (during step {chaos.step})"
        with chaos.lock:
            if len(chaos.report.notes) < 20:
                chaos.report.notes.append(note)
        return err


def reader(chaos, fs: FileSystem, r: int) -> None:
    rng = random.Random(f"hedgefs-chaos/{chaos.config.seed}/reader/{r}")
    while not chaos.stop.is_set():
        with chaos.lock:
            paths = sorted(chaos.files)
        if not paths:
            chaos.stop.wait(0.1)
            continue
        path = rng.choice(paths)
        with chaos.lock:
            f = chaos.files.get(path)
        if f is None:
            continue
        offset = rng.randrange(len(f.data) + 1)
        length = rng.randrange(min(len(f.data) - offset, 2 * POLICY.stripe_data_size) + 1)
        began = time.monotonic()
        try:
            with fs.open(path) as handle:
                got = handle.pread(offset, length)
            if handle.length != len(f.data) and len(got) == min(length, max(0, handle.length - offset)):
                length = common_prefix(chaos, f, got, offset, length)   # another version: what both hold
                got = got[:length]
        except HedgefsError as err:
            if stored(chaos, f):
                count_clean_failure(chaos, err)
            chaos.stop.wait(0.05)
            continue
        except Exception:  # noqa: BLE001 - a read must fail cleanly or not at all
            with chaos.lock:
                chaos.pending.append(f"reader {r}: pread {path} [{offset}, +{length}) failed uncleanly: "
                                     f"{traceback.format_exc().strip().splitlines()[-1]}")
            continue
        compare(chaos, f, got, offset, length, f"reader {r}", time.monotonic() - began)
        chaos.stop.wait(0.02)
