"""Directory trees from the command line: ``put -r``, ``get -r``, ``cp -r`` (as ``hdfs dfs -put``
of a directory, and ``cp -r``).

Where the tree goes: DST that is an existing directory gets the tree inside it
(DST/basename(SRC)); any other DST becomes the copy (its missing parents are made, as ``put``
makes them). A directory already there is merged into; a file already there is kept unless
``-f`` (that file fails, the others go on).

How: the source is walked first (the plan: directories and files, with sizes), then the
directories are made (only the deepest ones, each with its parents: one call a branch, not
one a directory), then the files are copied by ``threads`` workers over one FileSystem (its
calls are thread-safe; the bytes move on its one event loop). Every file appears only when
complete: a cluster file at the NameNode's Complete, a local one by a rename of a temporary
file beside it (cli/local.py). On a terminal a progress line counts files and bytes.

Failures: a file (or directory) that cannot be copied is one line on stderr naming it, and the
copy goes on with the rest, as ``cp -r`` does; at the end, a summary line, and the exit code is
the first failure's (2: exists, not UTF-8, ...; 1: failed; 3: NameNode unreachable; 4: not
allowed). A NameNode that is unreachable or a refusal to write at all stops the copy early
(every other file would fail the same way). What the walk skips (sockets, FIFOs, devices,
symlinks to directories, dangling symlinks) is one warning line each; symlinks to files are
followed (their target's bytes are copied), as ``hdfs dfs -put`` does.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import stat as stat_
import sys
import threading
import time
from typing import Callable, Iterator

import click

from hedgefs.client.errors import HedgefsError, NotADirectory, NotAllowed, NotFound, Unavailable, UsageError

DEFAULT_THREADS = 16   # small files are latency-bound (NameNode calls, DataNode fsyncs): many in flight
BATCH = 1000           # directories (or empty files) made in one NameNode call


@dataclasses.dataclass(frozen=True)
class Entry:
    rel: str         # path below the tree's root, "/"-separated ("" = the root itself)
    size: int
    is_dir: bool


@dataclasses.dataclass
class Plan:
    dirs: list[Entry]
    files: list[Entry]
    skipped: list[str]   # warnings: what the walk leaves out, and why

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)


def _join(root: str, rel: str, sep: str = "/") -> str:
    if not rel:
        return root
    return root.rstrip(sep) + sep + rel if root != sep else sep + rel


def leaf_dirs(dirs: list[Entry]) -> list[Entry]:
    """The directories that are no other's parent: making each with its parents makes them all."""
    parents = set()
    for d in dirs:
        rel = d.rel
        while rel:
            rel = rel.rpartition("/")[0]
            if rel in parents:
                break
            parents.add(rel)
    return [d for d in dirs if d.rel not in parents]


# ---------------------------------------------------------------------------- walking a source


def walk_local(root: str) -> Plan:
    """A local directory tree (names that are not UTF-8 are kept: the copy fails them one by one)."""
    dirs, files, skipped = [Entry("", 0, True)], [], []

    def rel_of(path: str) -> str:
        return os.path.relpath(path, root).replace(os.sep, "/")

    def onerror(err: OSError) -> None:
        skipped.append(f"cannot read {err.filename}: {err.strerror}")

    for here, subdirs, names, in_fd in _fwalk(root, onerror):
        subdirs.sort()   # in place: fwalk descends in this order
        for name in subdirs:
            dirs.append(Entry(rel_of(os.path.join(here, name)), 0, True))
        for name in sorted(names):
            path = os.path.join(here, name)
            try:
                st = os.stat(name, dir_fd=in_fd)   # follows a symlink: its target's bytes are copied
            except FileNotFoundError:
                skipped.append(f"skipped {path}: a dangling symbolic link")
                continue
            except OSError as err:
                skipped.append(f"cannot read {path}: {err.strerror}")
                continue
            if stat_.S_ISREG(st.st_mode):
                files.append(Entry(rel_of(path), st.st_size, False))
            elif stat_.S_ISDIR(st.st_mode):
                skipped.append(f"skipped {path}: a symbolic link to a directory")
            else:
                skipped.append(f"skipped {path}: not a regular file")
    return Plan(dirs, files, skipped)


def _fwalk(root: str, onerror) -> Iterator[tuple[str, list[str], list[str], int]]:
    """os.fwalk with its names sorted by the caller; symlinks to directories appear among files."""
    for here, subdirs, names, fd in os.fwalk(root, onerror=onerror):
        # fwalk lists a symlink to a directory among the directories: move it to the names.
        links = [d for d in subdirs if os.path.islink(os.path.join(here, d))]
        for d in links:
            subdirs.remove(d)
        yield here, subdirs, names + links, fd


def walk_remote(fs, root: str) -> Plan:
    """A cluster directory tree, as the NameNode pages it."""
    dirs, files = [Entry("", 0, True)], []
    cut = len(root.rstrip("/")) + 1
    for status in fs.iter_list(root, recursive=True):
        rel = status.path[cut:]
        (dirs if status.is_dir else files).append(Entry(rel, 0 if status.is_dir else status.length, status.is_dir))
    return Plan(dirs, files, [])


# ---------------------------------------------------------------------------- progress


class TreeProgress:
    """One line on stderr, redrawn at most every 0.1 s, shown only on a terminal: files and
    bytes done of the plan's, and the rate."""

    def __init__(self, label: str, files: int, total_bytes: int, stream=None):
        self._stream = stream or sys.stderr
        self._label = label
        self._files, self._bytes = files, total_bytes
        self.files_done = self.bytes_done = 0
        self._start = time.monotonic()
        self._last_draw = 0.0
        self._drawn = False
        self._enabled = self._stream.isatty()
        self._lock = threading.Lock()

    def add(self, nbytes: int = 0, files: int = 0) -> None:
        with self._lock:
            self.bytes_done += nbytes
            self.files_done += files
            now = time.monotonic()
            if self._enabled and (now - self._last_draw > 0.1 or self.files_done == self._files):
                self._last_draw = now
                self._draw(now)

    def _draw(self, now: float) -> None:
        elapsed = max(now - self._start, 1e-6)
        frac = self.bytes_done / self._bytes if self._bytes else self.files_done / max(self._files, 1)
        bar = "#" * int(min(1.0, frac) * 20)
        self._stream.write(
            f"\r{self._label} [{bar:<20}] {self.files_done:,}/{self._files:,} files, "
            f"{_mib(self.bytes_done)}/{_mib(self._bytes)}, {self.files_done / elapsed:,.0f} files/s, "
            f"{_mib(self.bytes_done / elapsed)}/s ")
        self._stream.flush()
        self._drawn = True

    def finish(self) -> None:
        with self._lock:
            if self._drawn:
                self._draw(time.monotonic())
                self._stream.write("\n")
                self._stream.flush()
                self._drawn = False


def _mib(n: float) -> str:
    return f"{n / 1048576:.1f} MiB"


# ---------------------------------------------------------------------------- copying


# Failures that every other file would meet too: the copy stops instead of repeating them.
FATAL = (Unavailable,)


class TreeCopy:
    """Run a plan: ``make_dir(rel)`` for each deepest directory, then ``copy_file(entry,
    progress)`` for each file, ``threads`` at a time; failures collected per entry."""

    def __init__(self, verb: str, plan: Plan, threads: int, show: str):
        self.verb = verb
        self.plan = plan
        self.threads = max(1, threads)
        self.failures: list[tuple[str, HedgefsError]] = []
        self.progress = TreeProgress(f"{verb} {show}", len(plan.files), plan.bytes)
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def _fail(self, name: str, err: HedgefsError) -> None:
        with self._lock:
            self.failures.append((name, err))
        self.progress.finish()   # the error's line starts a line of its own
        click.echo(f"hedgefs: {self.verb}: {err}", err=True)
        if isinstance(err, FATAL):
            self._stop.set()

    def _each(self, items: list, work: Callable, name_of: Callable) -> None:
        def one(item) -> None:
            if self._stop.is_set():
                return
            try:
                work(item)
            except HedgefsError as err:
                self._fail(name_of(item), err)
            except OSError as err:   # a local file: unreadable, a full disk
                self._fail(name_of(item), HedgefsError(
                    f"{err.filename or name_of(item)}: {err.strerror or err}"))
            except UnicodeEncodeError:
                from hedgefs.cli.humanize import visible

                self._fail(name_of(item), UsageError(f"invalid path {visible(name_of(item))}: not valid UTF-8"))

        if self.threads == 1 or len(items) <= 1:
            for item in items:
                one(item)
            return
        with concurrent.futures.ThreadPoolExecutor(self.threads, thread_name_prefix=f"hedgefs-{self.verb}") as pool:
            futures = [pool.submit(one, item) for item in items]
            try:
                for f in futures:
                    f.result()
            except BaseException:   # interrupted: nothing new starts; what runs is abandoned with us
                self._stop.set()
                for f in futures:
                    f.cancel()
                raise

    def _batched(self, entries: list[Entry], batch: Callable[[list[str]], list], name_of: Callable[[str], str],
                 files: bool = False) -> None:
        """``batch(rels)``: one answer per entry, None or its error (a batched NameNode call)."""
        for start in range(0, len(entries), BATCH):
            if self._stop.is_set():
                return
            chunk = entries[start:start + BATCH]
            try:
                answers = batch([e.rel for e in chunk])
            except HedgefsError as err:   # the call itself: every entry of it
                answers = [err] * len(chunk)
            for entry, err in zip(chunk, answers):
                if err is not None:
                    self._fail(name_of(entry.rel), err)
                elif files:
                    self.progress.add(files=1)

    def run(self, make_dir: Callable[[str], None], copy_file: Callable[[Entry, Callable[[int], None]], None],
            name_of: Callable[[str], str], make_dirs: Callable[[list[str]], list] | None = None,
            make_empty: Callable[[list[str]], list] | None = None) -> None:
        """``make_dirs``/``make_empty`` (a tree on the cluster): the deepest directories, and the
        empty files, made in batched calls (1,000 a call) instead of one call each."""
        for warning in self.plan.skipped:
            click.echo(f"hedgefs: {self.verb}: {warning}", err=True)
        dirs = [d for d in leaf_dirs(self.plan.dirs) if d.rel]
        if make_dirs is not None:
            self._batched(dirs, make_dirs, name_of)
        else:
            self._each(dirs, lambda d: make_dir(d.rel), lambda d: name_of(d.rel))

        def copy(entry: Entry) -> None:
            copy_file(entry, lambda n: self.progress.add(nbytes=n))
            self.progress.add(files=1)

        files = self.plan.files
        try:
            if make_empty is not None:
                self._batched([f for f in files if f.size == 0], make_empty, name_of, files=True)
                files = [f for f in files if f.size != 0]
            self._each(files, copy, lambda f: name_of(f.rel))
        finally:
            self.progress.finish()
        if self.failures:
            first = self.failures[0][1]
            total = len(self.plan.files) + len(self.plan.dirs)
            summary = f"{self.verb}: {len(self.failures)} of {total:,} entries failed (the first: {first})"
            err = HedgefsError(summary)
            err.exit_code = first.exit_code   # the first failure's: 2 for "exists", 3 unreachable, 4 not allowed
            raise err


# ---------------------------------------------------------------------------- the three verbs


def remote_target(fs, src_name: str, dst: str, typed_dir: bool) -> str:
    """Where a tree named ``src_name`` goes for DST on the cluster (see the module)."""
    try:
        st = fs.stat(dst)
    except NotFound:
        st = None
    except NotAllowed:
        st = None   # the mkdir says what is not allowed, naming what it needed
    if st is not None and not st.is_dir:
        raise NotADirectory(f"not a directory: {dst} (a tree needs a directory there)")
    if st is not None or typed_dir:
        return _join(dst, src_name)
    return dst


def check_remote_root(fs, root: str) -> None:
    """``root`` is a directory, or is made one (with its parents); a file there is bad input."""
    try:
        st = fs.stat(root)
    except NotFound:
        fs.mkdir(root, parents=True)
        return
    if not st.is_dir:
        raise NotADirectory(f"not a directory: {root} (a tree needs a directory there)")


def put_tree(fs, local: str, remote: str, typed_dir: bool, *, force: bool, policy: str | None, threads: int) -> None:
    from hedgefs.cli.paths import check_utf8

    local = local.rstrip(os.sep) or os.sep
    name = os.path.basename(os.path.abspath(local))
    root = remote_target(fs, check_utf8(name, "local name") if name else "", remote, typed_dir)
    plan = walk_local(local)
    check_remote_root(fs, root)

    def make_dir(rel: str) -> None:
        if rel:
            fs.mkdir(_join(root, rel), parents=True)

    def copy_file(entry: Entry, progress) -> None:
        with open(_join(local, entry.rel, os.sep), "rb") as source:
            fs.write(_join(root, entry.rel), source, overwrite=force, policy=policy, progress=progress)

    TreeCopy("put", plan, threads, f"{local} -> {root}").run(
        make_dir, copy_file, lambda rel: _join(local, rel, os.sep), *_batches(fs, root, force, policy))


def get_tree(fs, remote: str, local: str, *, force: bool, threads: int) -> None:
    from hedgefs.cli.local import check_target, write

    name = remote.rstrip("/").rsplit("/", 1)[-1]
    root = os.path.join(local, name) if os.path.isdir(local) and name else local
    if os.path.lexists(root) and not os.path.isdir(root):
        raise NotADirectory(f"not a directory: {root} (a tree needs a directory there)")
    if not os.path.isdir(os.path.dirname(os.path.abspath(root))):
        raise NotFound(f"no such local directory: {os.path.dirname(os.path.abspath(root))}")
    plan = walk_remote(fs, remote)
    os.makedirs(root, exist_ok=True)

    def make_dir(rel: str) -> None:
        if rel:
            os.makedirs(_join(root, rel, os.sep), exist_ok=True)

    def copy_file(entry: Entry, progress) -> None:
        target = _join(root, entry.rel, os.sep)
        real = check_target(target, force)
        with fs.open(_join(remote, entry.rel)) as f:
            f.check_available()

            def copy(out) -> None:
                with f.chunks(reuse=True) as chunks:
                    for chunk in chunks:
                        out.write(chunk)
                        progress(len(chunk))

            write(target, real, copy)

    TreeCopy("get", plan, threads, f"{remote} -> {root}").run(make_dir, copy_file, lambda rel: _join(remote, rel))


def cp_tree(fs, src: str, dst: str, *, force: bool, policy: str | None, threads: int) -> None:
    name = src.rstrip("/").rsplit("/", 1)[-1]
    root = remote_target(fs, name, dst, False)
    if root == src or root.startswith(src.rstrip("/") + "/"):
        raise UsageError(f"cp: cannot copy {src} into itself ({root})")
    plan = walk_remote(fs, src)
    check_remote_root(fs, root)

    def make_dir(rel: str) -> None:
        if rel:
            fs.mkdir(_join(root, rel), parents=True)

    def copy_file(entry: Entry, progress) -> None:
        with fs.open(_join(src, entry.rel)) as f, f.stream() as source:
            f.check_available()
            fs.write(_join(root, entry.rel), source, overwrite=force, policy=policy, progress=progress)

    TreeCopy("cp", plan, threads, f"{src} -> {root}").run(make_dir, copy_file, lambda rel: _join(src, rel),
                                                         *_batches(fs, root, force, policy))


def _batches(fs, root: str, force: bool, policy: str | None) -> tuple[Callable, Callable]:
    """A tree written to the cluster: its directories (with their parents) and its empty files
    made many at a time (Mkdirs, CreateMany: one NameNode call for up to 1,000)."""
    return (lambda rels: fs.mkdirs([_join(root, r) for r in rels], parents=True),
            lambda rels: fs.create_empty([_join(root, r) for r in rels], overwrite=force, policy=policy))
