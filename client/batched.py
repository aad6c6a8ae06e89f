"""The NameNode's batched namespace calls (StatMany, Mkdirs, DeleteMany, CreateMany), and stats
of many threads coalesced into them (batching.py's Batcher).

Each item of a batch is answered on its own: a list with, per item, its answer or the
HedgefsError its single call would have raised (one bad path fails alone, named). A mutating
item carries its own call id: a batch the client sends again (a failover, a lost reply) is
applied once per item by the NameNode's retry cache, as single calls would be.

An older NameNode without these calls answers UNIMPLEMENTED: from then on this client makes the
single calls instead (``supported`` False), with the same answers, so a newer client works with
an older cluster (one call per item, as before).
"""

from __future__ import annotations

from typing import Callable

import grpc

from hedgefs.client.batching import Batcher
from hedgefs.client.errors import HedgefsError, NotFound, Unimplemented, refusal
from hedgefs.client.locations import FileStatus, stat_request
from hedgefs.client.namenodes import NameNodes, call_id
from hedgefs.proto import hedgefs_pb2 as pb

MAX_ITEMS = 1000          # a batch's items (the NameNode refuses more)
STAT_BATCH = 256          # operations coalesced into one call at most
STATS_IN_FLIGHT = 2       # coalesced calls of one kind on the way at once


def _errors(results) -> list[HedgefsError | None]:
    """Per ItemResult: None (done) or the error its single call would have raised."""
    return [None if r.code == 0 else refusal(_STATUS.get(r.code, grpc.StatusCode.UNKNOWN), r.message)
            for r in results]


_STATUS = {code.value[0]: code for code in grpc.StatusCode}   # ItemResult.code -> grpc.StatusCode


class BatchedCalls:
    def __init__(self, namenodes: NameNodes, located: Callable[[pb.FileInfo], FileStatus]):
        self._nn = namenodes
        self._located = located
        self.supported = True   # False once the NameNode said it has no batched calls
        self.stats = Batcher(self._stat_batch, max_batch=STAT_BATCH, max_in_flight=STATS_IN_FLIGHT)
        self.xattr_stats = Batcher(lambda paths: self._stat_batch(paths, True), max_batch=STAT_BATCH,
                                   max_in_flight=STATS_IN_FLIGHT)   # stats with the files' xattrs
        # Changes of many threads: each item its own request and call id, one call for those waiting.
        self.mkdir_calls = Batcher(self._mkdirs, max_batch=STAT_BATCH, max_in_flight=STATS_IN_FLIGHT)
        self.delete_calls = Batcher(self._deletes, max_batch=STAT_BATCH, max_in_flight=STATS_IN_FLIGHT)
        self.empty_calls = Batcher(self._empties, max_batch=STAT_BATCH, max_in_flight=STATS_IN_FLIGHT)

    # ------------------------------------------------------------------ one operation, coalesced

    def mkdir(self, path: str, parents: bool, permission: int | None = None) -> FileStatus:
        """Mkdir, in one call with whatever other threads make meanwhile: the directory's status."""
        return self.mkdir_calls.call((path, parents, permission))

    def delete(self, path: str, recursive: bool) -> None:
        self.delete_calls.call((path, recursive))

    def create_one_empty(self, path: str, overwrite: bool, policy: str) -> None:
        self.empty_calls.call((path, overwrite, policy))

    # ------------------------------------------------------------------ stat

    def stat(self, path: str, xattrs: bool = False) -> FileStatus:
        """GetFileInfo of ``path`` (``xattrs``: with the file's), in one call with whatever other
        threads stat meanwhile."""
        if not self.supported:
            return self._stat_one(path, xattrs)
        return (self.xattr_stats if xattrs else self.stats).call(path)

    def _stat_one(self, path: str, xattrs: bool = False) -> FileStatus:
        """The plain GetFileInfo."""
        return self._located(self._nn.call("GetFileInfo", stat_request(path, xattrs)), xattrs)

    def _stat_batch(self, paths: list[str], xattrs: bool = False) -> list:
        if len(paths) == 1 or not self.supported:   # alone: the plain call (no batch to pack)
            return [self._one(lambda p=p: self._stat_one(p, xattrs)) for p in paths]
        return self.stat_many(paths, xattrs)

    def stat_many(self, paths: list[str], xattrs: bool = False) -> list:
        """Per path, its FileStatus (a file's with its block groups; ``xattrs``: and its extended
        attributes) or its HedgefsError."""
        out: list = []
        for chunk in _chunks(paths):
            answer = self._batch("StatMany", pb.StatManyRequest(paths=[stat_request(p, xattrs) for p in chunk]))
            if answer is None:
                out += [self._one(lambda p=p: self._stat_one(p, xattrs)) for p in chunk]
                continue
            for info, err in zip(answer.infos, _errors(answer.results)):
                out.append(err if err is not None else self._located(info, xattrs))
        return out

    # ------------------------------------------------------------------ changes

    def mkdirs(self, paths: list[str], parents: bool = True) -> list:
        """Per path, None (made, or there already with ``parents``) or its HedgefsError."""
        return [out if isinstance(out, HedgefsError) else None
                for out in self._mkdirs([(p, parents, None) for p in paths], statuses=False)]

    def delete_many(self, paths: list[str], recursive: bool = False) -> list:
        """Per path, None (deleted) or its HedgefsError."""
        return self._deletes([(p, recursive) for p in paths])

    def create_empty(self, paths: list[str], overwrite: bool = False, policy: str = "") -> list:
        """Per path, None (an empty file there, complete: one call for all) or its HedgefsError."""
        return self._empties([(p, overwrite, policy) for p in paths])

    def _mkdirs(self, items: list[tuple[str, bool, int | None]], statuses: bool = True) -> list:
        """Per (path, parents, permission): the directory's FileStatus (None without ``statuses``
        from an older NameNode), or its HedgefsError. One item alone is the plain Mkdir."""
        def answered(answer, chunk) -> list:
            infos = list(answer.infos) if len(answer.infos) == len(chunk) else [None] * len(chunk)   # (older: none)
            return [err if err is not None else self._one(lambda item=item, info=info: self._made(item, info, statuses))
                    for item, info, err in zip(chunk, infos, _errors(answer.results))]

        return self._changes(items, "Mkdirs", lambda chunk, ids: pb.MkdirsRequest(
            dirs=[_mkdir(*item) for item in chunk], call_ids=ids),
            lambda item: self._made(item, self._mkdir_one(item), statuses), answered=answered)

    def _mkdir_one(self, item: tuple[str, bool, int | None]) -> pb.FileInfo | None:
        """The plain Mkdir: its answer's info, None from an older NameNode (it answers none)."""
        answer = self._nn.call("Mkdir", _mkdir(*item))
        return answer.info if answer.HasField("info") else None

    def _made(self, item: tuple[str, bool, int | None], info: pb.FileInfo | None,
              statuses: bool) -> FileStatus | None:
        """A made directory's status, as the NameNode answered it. An empty one: the call was a
        retry (a failover, a lost reply) and the directory it made is gone since (deleted, or
        replaced by a file): NotFound if the status is wanted, nothing to set up. None: an older
        NameNode, which answers none and makes it 0755 (then SetPermission, and GetFileInfo if
        the status is wanted)."""
        path, _parents, permission = item
        if info is not None:
            if info.path:
                return self._located(info)
            if statuses:
                raise NotFound(f"{path}: the directory was made, and is gone since (deleted or replaced meanwhile)")
            return None
        if permission is not None:
            self._nn.call("SetPermission", pb.SetPermissionRequest(path=path, permission=permission))
        return self._stat_one(path) if statuses else None

    def _deletes(self, items: list[tuple[str, bool]]) -> list:
        return self._changes(items, "DeleteMany", lambda chunk, ids: pb.DeleteManyRequest(
            deletes=[pb.DeleteRequest(path=p, recursive=recursive) for p, recursive in chunk], call_ids=ids),
            lambda item: self._nn.call("Delete", pb.DeleteRequest(path=item[0], recursive=item[1])))

    def _empties(self, items: list[tuple[str, bool, str]]) -> list:
        def single(item) -> None:   # an older NameNode: Create and Complete
            path, overwrite, policy = item
            created = self._nn.call("Create", pb.CreateRequest(path=path, overwrite=overwrite, policy=policy))
            self._nn.call("Complete", pb.CompleteRequest(file_id=created.file_id, length=0))

        return self._changes(items, "CreateMany", lambda chunk, ids: pb.CreateManyRequest(
            creates=[pb.CreateRequest(path=p, overwrite=overwrite, policy=policy, empty=True)
                     for p, overwrite, policy in chunk], call_ids=ids), single, alone=False)

    def _changes(self, items: list[tuple], method: str, request, single, alone: bool = True,
                 answered=None) -> list:
        """Per item, its answer (None, or a FileStatus ``single`` or ``answered`` gave) or its
        error: one batched call per 1,000 items, each item its own call id (``request(chunk,
        ids)``), its answer ``answered(answer, chunk)`` (default: the items' errors); with
        ``alone``, one item alone is its plain single call (nothing to pack), as on an older
        NameNode. (Not for an empty file: an older NameNode would take Create's ``empty`` for a
        Create, and leave the file unfinished; CreateMany it refuses, UNIMPLEMENTED.)"""
        if alone and len(items) == 1:
            return [self._one(lambda: single(items[0]))]
        out: list = []
        for chunk in _chunks(items):
            answer = self._batch(method, request(chunk, [call_id() for _ in chunk]))
            if answer is None:
                out += [self._one(lambda item=item: single(item)) for item in chunk]
            else:
                out += answered(answer, chunk) if answered else _errors(answer.results)
        return out

    # ------------------------------------------------------------------ plumbing

    def _batch(self, method: str, request):
        """The batched call's answer; None if this NameNode has no batched calls (then: single calls)."""
        if not self.supported:
            return None
        try:
            return self._nn.call(method, request)
        except Unimplemented:
            self.supported = False
            return None

    @staticmethod
    def _one(fn):
        try:
            result = fn()
        except HedgefsError as err:
            return err
        return None if not isinstance(result, FileStatus) else result


def _mkdir(path: str, parents: bool, permission: int | None) -> pb.MkdirRequest:
    request = pb.MkdirRequest(path=path, parents=parents)
    if permission is not None:
        request.permission = permission
    return request


def _chunks(items: list) -> list[list]:
    return [items[i:i + MAX_ITEMS] for i in range(0, len(items), MAX_ITEMS)] if items else []

