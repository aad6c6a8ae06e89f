"""Where bytes come from and go to: a hedgefs cluster or the local filesystem, one interface.

    hedgefs://HOST:PORT/path   a cluster (``hedgefs:///path`` and a bare ``/path``: the default NameNode)
    file:///path, ./dir, dir   the local filesystem

A side lists, stats, checksums and reads (``Source.submit``: a cancellable positional read); the
destination half (parts, concat, local temp files) is the job's business (job.py).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import stat as stat_module

from hedgefs.client.checksum import FileChecksum, local_file_checksum
from hedgefs.client.errors import NotFound, UsageError
from hedgefs.client.fs import FileSystem, FileStatus

SCHEME = "hedgefs://"
DEFAULT_PORT = 8020


@dataclasses.dataclass(frozen=True)
class Location:
    namenode: str | None   # None: the local filesystem
    path: str              # absolute, normalised

    @property
    def is_local(self) -> bool:
        return self.namenode is None

    def join(self, name: str) -> "Location":
        return Location(self.namenode, join(self.path, name))

    def __str__(self) -> str:
        return f"file://{self.path}" if self.is_local else f"{SCHEME}{self.namenode}{self.path}"


def join(parent: str, name: str) -> str:
    return parent.rstrip("/") + "/" + name if parent != "/" else "/" + name


def parent_of(path: str) -> str:
    head = path.rstrip("/").rsplit("/", 1)[0]
    return head or "/"


def basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def parse_location(text: str, default_namenode: str) -> Location:
    """A command-line path as a Location; UsageError (exit 2) for what is neither kind."""
    if text.startswith(SCHEME):
        authority, _, path = text[len(SCHEME):].partition("/")
        if authority and ":" not in authority.rsplit("]", 1)[-1]:
            authority += f":{DEFAULT_PORT}"    # as HDFS: hdfs://nn/path is port 8020
        if authority and not authority.rsplit(":", 1)[1].isdigit():
            raise UsageError(f"bad hedgefs address in {text!r}: expected hedgefs://HOST[:PORT]/path")
        return Location(authority or default_namenode, _clean("/" + path))
    if text.startswith("file://"):
        path = text[len("file://"):]
        if not path.startswith("/"):
            raise UsageError(f"bad local path {text!r}: expected file:///absolute/path")
        return Location(None, os.path.abspath(path))
    if "://" in text:
        raise UsageError(f"unsupported path {text!r}: use hedgefs://HOST:PORT/path, /path, file:///path or ./path")
    if text.startswith("/"):
        return Location(default_namenode, _clean(text))
    if not text:
        raise UsageError("empty path")
    return Location(None, os.path.abspath(text))


def _clean(path: str) -> str:
    """Trailing and doubled slashes go (the NameNode refuses them); everything else it checks itself."""
    while "//" in path:
        path = path.replace("//", "/")
    return path.rstrip("/") or "/"


@dataclasses.dataclass(frozen=True)
class Entry:
    path: str
    is_dir: bool
    length: int
    mtime_ms: int
    identity: tuple = ()   # what changes when the file's bytes may have: checked again at commit


class Source:
    """An open source file: cancellable positional reads."""

    def submit(self, offset: int, length: int, exclude: frozenset[str] = frozenset()) -> concurrent.futures.Future:
        raise NotImplementedError

    def overdue(self) -> dict[str, int]:
        """Reads per DataNode that crossed the hedge threshold so far (where reads have DataNodes)."""
        return {}

    def close(self) -> None:
        pass


class ClusterSide:
    def __init__(self, fs: FileSystem):
        self.fs = fs

    @staticmethod
    def _entry(status: FileStatus) -> Entry:
        groups = tuple(g.id for g in status.groups)
        return Entry(status.path, status.is_dir, status.length, status.mtime_ms,
                     (status.length, status.mtime_ms, groups) if groups or not status.is_dir else ())

    def stat(self, path: str) -> Entry | None:
        try:
            return self._entry(self.fs.stat(path))
        except NotFound:
            return None

    def list(self, path: str) -> list[Entry]:
        return [self._entry(s) for s in self.fs.list(path)]

    def checksum(self, path: str) -> FileChecksum:
        return self.fs.checksum(path)

    def open(self, path: str) -> Source:
        return _ClusterSource(self.fs, path)

    def mkdirs(self, path: str) -> None:
        self.fs.mkdir(path, parents=True)

    def close(self) -> None:
        self.fs.close()


class _ClusterSource(Source):
    def __init__(self, fs: FileSystem, path: str):
        self._fs = fs
        self._reader = fs.open(path)

    def submit(self, offset, length, exclude=frozenset()):
        return self._reader.submit(offset, length, exclude)

    def overdue(self) -> dict[str, int]:
        return self._fs.metrics.overdue_counts()


class LocalSide:
    def __init__(self, threads: int = 8):
        self._pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="distcp-local")

    @staticmethod
    def _entry(path: str, st: os.stat_result) -> Entry:
        is_dir = stat_module.S_ISDIR(st.st_mode)
        mtime_ms = st.st_mtime_ns // 1_000_000
        return Entry(path, is_dir, 0 if is_dir else st.st_size, mtime_ms,
                     () if is_dir else (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev))

    def stat(self, path: str) -> Entry | None:
        try:
            return self._entry(path, os.stat(path))
        except FileNotFoundError:
            return None

    def list(self, path: str) -> list[Entry]:
        out = []
        with os.scandir(path) as it:
            for d in it:
                st = d.stat()  # follows symlinks: a link is copied as what it points to
                if stat_module.S_ISDIR(st.st_mode) or stat_module.S_ISREG(st.st_mode):
                    out.append(self._entry(d.path, st))
        return sorted(out, key=lambda e: e.path)

    def checksum(self, path: str) -> FileChecksum:
        return local_file_checksum(path)

    def open(self, path: str) -> Source:
        return _LocalSource(self._pool, path)

    def mkdirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class _LocalSource(Source):
    def __init__(self, pool: concurrent.futures.ThreadPoolExecutor, path: str):
        self._pool = pool
        try:
            self._fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            raise NotFound(f"no such local file: {path}") from None

    def submit(self, offset, length, exclude=frozenset()):
        return self._pool.submit(os.pread, self._fd, length, offset)

    def close(self) -> None:
        os.close(self._fd)
