"""``HedgeFileSystem``: hedgefs as an fsspec filesystem, so pandas, pyarrow, dask and anything
else that takes fsspec URLs reads ``hedgefs://`` with hedged reads behind it.

    fs = fsspec.filesystem("hedgefs", namenode="nn:8020")       # or HEDGEFS_NAMENODE
    pd.read_parquet("hedgefs://nn:8020/data/t.parquet")
    pd.read_csv("hedgefs:///data/t.csv")                         # the NameNode HEDGEFS_NAMENODE names

URLs: ``hedgefs://HOST:PORT/path`` names the NameNode; ``hedgefs:///path`` (or a bare ``/path``)
uses the ``namenode`` storage option, else ``HEDGEFS_NAMENODE``, else 127.0.0.1:8020. Paths are
absolute: ``a/b`` is ``/a/b``.

Storage options: ``namenode``; ``credentials`` (a credential file for a secure cluster; by
default the one ``HEDGEFS_CREDENTIALS`` names, None for none); ``policy`` (for new files; by
default the directory's); ``hedge_threshold_ms`` (a number or "auto"); ``hedge`` (False: no
hedged reads; or a dict of HedgeConfig's keys). Unset hedge keys come from HEDGEFS_HEDGE_*.

Every method is one of the library's calls (client/fs.py's FileSystem): ``ls``/``info``/``find``
are List and GetFileInfo (``find`` one recursive, paged listing), ``mv`` is a rename, ``rm`` a
(recursive) delete, ``checksum``/``ukey`` the layout-independent COMPOSITE-CRC32C. A write creates
missing parent directories, as HDFS's create does. Errors are Python's (errors.py).
"""

from __future__ import annotations

import concurrent.futures
import datetime
import math
import os
import posixpath
import time

from fsspec.callbacks import DEFAULT_CALLBACK
from fsspec.spec import AbstractFileSystem
from fsspec.utils import stringify_path

from hedgefs.client.config import HedgeConfig
from hedgefs.client.fs import FROM_ENVIRONMENT, FileSystem, namenode_address
from hedgefs.client.errors import HedgefsError
from hedgefs.ec.policy import parse_policy
from hedgefs.fsspec.errors import python_error, translated
from hedgefs.client.streams import ReadAhead
from hedgefs.fsspec.files import ByteCounter, HedgeFile

PROTOCOL = "hedgefs"
DEFAULT_PORT = 8020
TROUBLE_S = 30.0     # reads go in pieces this long after the client last hedged or read around a DataNode
PIECE_BYTES = 8 << 20   # a piece of a read while in trouble: whole stripes, about this many bytes
CHUNK_READ_AHEAD = 2   # chunks (~8 MiB each) in flight in get_file and cp_file


class HedgeFileSystem(AbstractFileSystem):
    protocol = PROTOCOL
    root_marker = "/"

    def __init__(self, namenode: str | None = None, credentials: str | None = FROM_ENVIRONMENT,
                 policy: str | None = None, hedge_threshold_ms: float | str | None = None,
                 hedge: bool | dict | None = None, **storage_options):
        super().__init__(**storage_options)
        flags = dict(hedge) if isinstance(hedge, dict) else ({} if hedge is None else {"enabled": bool(hedge)})
        if hedge_threshold_ms is not None:
            flags["threshold_ms"] = hedge_threshold_ms
        self.hedge_config = HedgeConfig.from_sources(flags)   # ValueError on a bad value
        self.namenode = namenode_address(namenode)
        self.policy = policy
        with translated():
            self.client = FileSystem(self.namenode, self.hedge_config, credentials)
        self._trouble_seen, self._trouble_at = 0, -math.inf
        self.asked = ByteCounter()     # bytes the file objects' callers read
        self.fetched = ByteCounter()   # ranges and bytes asked of the hedged reader

    # ------------------------------------------------------------------ URLs

    @classmethod
    def _strip_protocol(cls, path):
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = stringify_path(path)
        if path.startswith(PROTOCOL + "://"):
            rest = path[len(PROTOCOL) + 3:]
            path = rest[rest.find("/"):] if "/" in rest else "/"   # drops HOST:PORT
        elif path.startswith(PROTOCOL + ":"):
            path = path[len(PROTOCOL) + 1:]
        path = "/" + path.lstrip("/")
        return path.rstrip("/") or "/"

    @staticmethod
    def _get_kwargs_from_urls(path):
        path = stringify_path(path)
        if not path.startswith(PROTOCOL + "://"):
            return {}
        netloc = path[len(PROTOCOL) + 3:].split("/", 1)[0]
        if not netloc:
            return {}
        return {"namenode": netloc if ":" in netloc else f"{netloc}:{DEFAULT_PORT}"}

    def unstrip_protocol(self, name: str) -> str:
        return f"{PROTOCOL}://{self.namenode}{self._strip_protocol(name)}"

    @classmethod
    def _parent(cls, path):
        return posixpath.dirname(cls._strip_protocol(path)) or "/"

    def close(self) -> None:
        """Close the client (its I/O thread and connections); the next ``filesystem()`` makes a new one."""
        type(self)._cache.pop(self._fs_token, None)
        self.client.close()

    def piece(self) -> int:
        """The most one positional read asks for (0: no limit). While the client is in trouble, a
        32 MiB read is six 6 MiB reads of 1 MiB unit ranges in flight together, not six 5 MiB unit
        reads: a slow DataNode is hedged at the threshold of a 1 MiB read, and the latency model,
        which judges a DataNode slow on several reads, learns of it within the file (later pieces
        read around it). A healthy client reads in one piece: fewer, longer unit reads move more
        bytes per CPU second."""
        return PIECE_BYTES if self.in_trouble() else 0

    def in_trouble(self) -> bool:
        """Whether the client has hedged, read around or rebuilt a unit in the last TROUBLE_S, or
        holds a DataNode slow: then reads go to the hedged reader in pieces (``piece``)."""
        m = self.client.metrics
        seen = m.counter("hedges") + m.counter("avoided") + m.counter("rebuilt_on_failure")
        now = time.monotonic()
        if seen != self._trouble_seen:
            self._trouble_seen, self._trouble_at = seen, now
        return now - self._trouble_at < TROUBLE_S or bool(self.client.model.slow_datanodes())

    def stats(self):
        """The client's read counters (hedges, wins, unit reads): ``FileSystem.stats``."""
        return self.client.stats()

    # ------------------------------------------------------------------ namespace

    def _info(self, st) -> dict:
        return {
            "name": st.path, "size": 0 if st.is_dir else st.length, "type": "directory" if st.is_dir else "file",
            "mtime": st.mtime_ms / 1000, "policy": st.policy, "block_size": st.block_size,
            "owner": st.owner, "group": st.group, "mode": st.permission,
        }

    def info(self, path, **kwargs):
        with translated():
            return self._info(self.client.stat(self._strip_protocol(path)))

    def ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path)
        with translated():
            entries = [self._info(st) for st in self.client.iter_list(path)]
            if not entries and not self.client.stat(path).is_dir:   # a file lists as itself
                entries = [self.info(path)]
        return entries if detail else [e["name"] for e in entries]

    def find(self, path, maxdepth=None, withdirs=False, detail=False, **kwargs):
        if maxdepth is not None:
            return super().find(path, maxdepth=maxdepth, withdirs=withdirs, detail=detail, **kwargs)
        path = self._strip_protocol(path)
        try:
            top = self.info(path)
        except FileNotFoundError:
            return {} if detail else []
        out = {}
        if top["type"] == "file":
            out[path] = top
        else:
            if withdirs:
                out[path] = top
            with translated():
                for st in self.client.iter_list(path, recursive=True):   # one paged listing, not a walk
                    if withdirs or not st.is_dir:
                        out[st.path] = self._info(st)
        names = sorted(out)
        return {name: out[name] for name in names} if detail else names

    def mkdir(self, path, create_parents=True, **kwargs):
        path = self._strip_protocol(path)
        with translated():
            if create_parents and self._parent(path) != path:
                self.client.mkdir(self._parent(path), parents=True)
            self.client.mkdir(path)   # FileExistsError if it is there, as os.mkdir

    def makedirs(self, path, exist_ok=False):
        path = self._strip_protocol(path)
        if not exist_ok:
            return self.mkdir(path, create_parents=True)
        with translated():
            self.client.mkdir(path, parents=True)   # a file in the way: FileExistsError

    def rmdir(self, path):
        path = self._strip_protocol(path)
        if not self.isdir(path):
            raise NotADirectoryError(f"not a directory: {path}")
        with translated():
            self.client.delete(path)   # OSError "directory not empty: ..." if it holds anything

    def rm_file(self, path):
        path = self._strip_protocol(path)
        if self.isdir(path):
            raise IsADirectoryError(f"is a directory: {path}")
        with translated():
            self.client.delete(path)

    def _rm(self, path):
        with translated():
            self.client.delete(self._strip_protocol(path))

    def rm(self, path, recursive=False, maxdepth=None):
        if maxdepth is not None:
            return super().rm(path, recursive=recursive, maxdepth=maxdepth)
        paths = self.expand_path(path, recursive=recursive)
        if recursive:   # one recursive delete per top-most path: the NameNode removes each tree at once
            paths = [p for p in paths if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in paths)]
        for p in sorted(paths, reverse=True):   # children before their parents
            with translated():
                self.client.delete(p, recursive=recursive)

    def mv(self, path1, path2, recursive=False, maxdepth=None, **kwargs):
        """A rename (files and whole directories alike); into ``path2`` if it is a directory; over
        ``path2`` if it is a file. Lists and globs: one rename each."""
        if isinstance(path1, list) or isinstance(path2, list) or any(c in path1 for c in "*?["):
            sources = self.expand_path(path1, recursive=False)
            if isinstance(path2, list):
                targets = [self._strip_protocol(p) for p in path2]
            else:
                targets = [posixpath.join(self._strip_protocol(path2), posixpath.basename(s)) for s in sources]
                self.makedirs(path2, exist_ok=True)
            for src, dst in zip(sources, targets):
                self.mv(src, dst)
            return
        src, dst = self._strip_protocol(path1), self._strip_protocol(path2)
        if src == dst:
            return
        source = self.info(src)
        try:
            target = self.info(dst)
        except FileNotFoundError:
            target = None
        if target is not None and target["type"] == "directory":
            dst = posixpath.join(dst, posixpath.basename(src))
        elif target is not None and source["type"] == "file":
            self.rm_file(dst)
        self._with_parents(dst, lambda: self.client.rename(src, dst))
        self.invalidate_cache()

    # ------------------------------------------------------------------ write

    def _with_parents(self, path: str, call):
        """``call()``; if the parent directory of ``path`` is missing, make it and call again."""
        try:
            with translated():
                return call()
        except FileNotFoundError:
            parent = self._parent(path)
            if self.exists(parent):
                raise
            self.makedirs(parent, exist_ok=True)
            with translated():
                return call()

    def write_from(self, path: str, source, overwrite: bool = True, policy: str | None = None, progress=None) -> int:
        """The library's striped write of everything ``source.read`` yields (parents made)."""
        path = self._strip_protocol(path)
        return self._with_parents(path, lambda: self.client.write(
            path, source, overwrite=overwrite, policy=policy or self.policy, progress=progress))

    def create_writer(self, path: str, overwrite: bool, policy: str | None):
        """The library's FileWriter for a file open for writing (parents made)."""
        path = self._strip_protocol(path)
        return self._with_parents(path, lambda: self.client.create(
            path, overwrite=overwrite, policy=policy or self.policy))

    def append_writer(self, path: str, policy: str | None):
        """The library's append FileWriter for ``ab``; a file that does not exist is created."""
        from hedgefs.client.errors import NotFound

        path = self._strip_protocol(path)
        with translated():
            try:
                return self.client.append(path)
            except NotFound:
                return self.create_writer(path, overwrite=False, policy=policy)

    def pipe_file(self, path, value, mode="overwrite", **kwargs):
        import io

        self.write_from(path, io.BytesIO(value), overwrite=mode != "create", policy=kwargs.get("policy"))
        self.invalidate_cache(self._parent(path))

    def put_file(self, lpath, rpath, callback=DEFAULT_CALLBACK, mode="overwrite", **kwargs):
        if os.path.isdir(lpath):
            self.makedirs(rpath, exist_ok=True)
            return
        with open(lpath, "rb") as source:
            callback.set_size(os.fstat(source.fileno()).st_size)
            self.write_from(rpath, source, overwrite=mode != "create", policy=kwargs.get("policy"),
                            progress=callback.relative_update)
        self.invalidate_cache(self._parent(rpath))

    def cp_file(self, path1, path2, **kwargs):
        """A streamed copy through this client (read hedged, written striped); a directory: made."""
        src = self._strip_protocol(path1)
        with translated():
            status = self.client.stat(src)
        if status.is_dir:
            self.makedirs(path2, exist_ok=True)
            return
        with translated(), self.client.open(src) as reader, reader.stream(read_ahead=CHUNK_READ_AHEAD) as source:
            self.write_from(path2, source, overwrite=True, policy=kwargs.get("policy"))

    # ------------------------------------------------------------------ read

    def _open(self, path, mode="rb", block_size=None, autocommit=True, cache_options=None, **kwargs):
        return HedgeFile(self, self._strip_protocol(path), mode, block_size or "default", autocommit,
                         cache_options=cache_options, **kwargs)

    @staticmethod
    def _range(length: int, start: int | None, end: int | None) -> tuple[int, int]:
        """fsspec's (start, end), negative = from the end, as [offset, offset + n) clipped to the file."""
        start = 0 if start is None else (max(0, length + start) if start < 0 else min(start, length))
        end = length if end is None else (max(0, length + end) if end < 0 else min(end, length))
        return start, max(start, end)

    def cat_file(self, path, start=None, end=None, **kwargs):
        with translated(), self.client.open(self._strip_protocol(path)) as reader:
            offset, stop = self._range(reader.length, start, end)
            self.fetched.add(stop - offset)
            stripe = parse_policy(reader.status.policy).stripe_data_size
            ahead = ReadAhead(reader, window=stripe, max_window=stripe, align=stripe, start=-1, piece=self.piece)
            return bytes(ahead.fetch(offset, stop - offset).result())   # one random read (in pieces in trouble)

    def cat_ranges(self, paths, starts, ends, max_gap=None, on_error="return", **kwargs):
        """Every range at once: each file opened once, each range one hedged positional read, all in
        flight together on the client's I/O loop (``max_gap`` is not needed: nothing is merged)."""
        if not isinstance(paths, list):
            raise TypeError("paths must be a list")
        starts = starts if isinstance(starts, list) else [starts] * len(paths)
        ends = ends if isinstance(ends, list) else [ends] * len(paths)
        if len(starts) != len(paths) or len(ends) != len(paths):
            raise ValueError("paths, starts and ends must be as long")
        readers: dict[str, object] = {}
        pending: list = []
        for path, start, end in zip(paths, starts, ends):
            path = self._strip_protocol(path)
            try:
                if path not in readers:
                    with translated():
                        readers[path] = self.client.open(path)
                reader = readers[path]
                offset, stop = self._range(reader.length, start, end)
                self.fetched.add(stop - offset)
                pending.append(reader.submit(offset, stop - offset))
            except Exception as err:
                if on_error != "return":
                    for f in pending:
                        if isinstance(f, concurrent.futures.Future):
                            f.cancel()
                    raise
                pending.append(err)
        out = []
        for i, item in enumerate(pending):
            if isinstance(item, Exception):
                out.append(item)
                continue
            try:
                out.append(bytes(item.result()))
            except HedgefsError as err:
                if on_error != "return":
                    for f in pending[i + 1:]:
                        if isinstance(f, concurrent.futures.Future):
                            f.cancel()
                    raise python_error(err) from err
                out.append(python_error(err))
        return out

    def get_file(self, rpath, lpath=None, callback=DEFAULT_CALLBACK, outfile=None, **kwargs):
        rpath = self._strip_protocol(rpath)
        with translated():
            status = self.client.stat(rpath)
        if status.is_dir:
            if outfile is None and not hasattr(lpath, "write"):
                os.makedirs(lpath, exist_ok=True)
            return
        target = outfile if outfile is not None else (lpath if hasattr(lpath, "write") else None)
        made = target is None
        if made:
            os.makedirs(os.path.dirname(os.path.abspath(lpath)), exist_ok=True)
            target = open(lpath, "wb")
        try:
            # Leased chunks only into a file made here, whose write copies them before it returns;
            # a caller's file-like may keep what it is given (a list, a queue, a lazy hasher).
            with translated(), self.client.open(rpath) as reader, \
                    reader.stream(read_ahead=CHUNK_READ_AHEAD, reuse=made) as chunks:
                callback.set_size(reader.length)
                for chunk in chunks:
                    target.write(chunk)
                    callback.relative_update(len(chunk))
        except BaseException:
            if made:
                target.close()
                os.unlink(lpath)   # no partial copy left behind
            raise
        if made:
            target.close()

    # ------------------------------------------------------------------ checksums and times

    def checksum(self, path):
        """The file's COMPOSITE-CRC32C: the same for the same bytes in any policy or block size."""
        with translated():
            return self.client.checksum(self._strip_protocol(path)).crc

    def ukey(self, path):
        info = self.info(path)
        if info["type"] == "directory":
            return f"directory {info['name']} {info['mtime']}"
        with translated():
            summed = self.client.checksum(info["name"])
        return f"{summed.algorithm} {summed.crc:08x} {summed.length}"

    def modified(self, path):
        return datetime.datetime.fromtimestamp(self.info(path)["mtime"], tz=datetime.timezone.utc)

    def created(self, path):
        """A file's: its mtime (hedgefs keeps no creation time: an append, a truncate or
        set_times changes it). A directory's creation time is not kept."""
        info = self.info(path)
        if info["type"] == "directory":
            raise NotImplementedError(f"hedgefs keeps no creation time for a directory: {info['name']}")
        return datetime.datetime.fromtimestamp(info["mtime"], tz=datetime.timezone.utc)
