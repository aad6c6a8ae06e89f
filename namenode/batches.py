"""Batched calls (issue 44): StatMany, Mkdirs, DeleteMany and CreateMany, many items of one kind
in one call, each item as its single call would be: its own checks, its own record with its own
retry ids, its own refusal (one bad item fails alone). What is the batch's own: at most
``MAX_BATCH`` items; ``BATCH_HOLD`` items changed per hold of the writers' lock (so a batch does
not hold it for long); one wait until durable for them all (their records share group commits).
A NotActive or safe-mode refusal is the whole call's (the client retries the call). A file
whose locations wait on block reports is answered, marked (FileInfo.locations_pending), not refused.
"""

from __future__ import annotations

from typing import Callable

from hedgefs.namenode.blocks.safe_mode import SafeModeRefusal
from hedgefs.namenode.errors import InvalidArgument, NameNodeError
from hedgefs.namenode.ha.roles import NotActive
from hedgefs.namenode.journal import records as r
from hedgefs.namenode.model import FileInfo
from hedgefs.namenode.namespace.inodes import SUPER
from hedgefs.namenode.namespace.retry_cache import MISS
from hedgefs.security.identity import Identity

MAX_BATCH = 1000             # items of a batched call (StatMany, Mkdirs, DeleteMany, CreateMany)
BATCH_HOLD = 128             # ... changed a hold of the writers' lock


class Batches:
    def __init__(self, ns):
        self.ns = ns   # the namesystem (its lock, journal and components)

    def file_infos(self, paths_: list[str], who: Identity = SUPER,
                   xattrs: list[bool] | None = None) -> list[FileInfo | NameNodeError]:
        """``file_info`` of each path: its answer, or its refusal (one bad path fails alone)."""
        _check_batch(paths_)
        out: list = []
        for path, with_xattrs in zip(paths_, xattrs or [False] * len(paths_)):
            try:
                out.append(self.ns.file_info(path, who, xattrs=with_xattrs))
            except NotActive:   # the whole call's: the client sends it to the active
                raise
            except NameNodeError as err:
                out.append(err)
        return out

    def changes(self, kind: type, what: str, items: list, retries: list | None, handler: Callable,
                again: Callable | None = None) -> list:
        """Many changes of one kind, each as its single call would be (its own checks, its own
        record with its own retry ids, its own refusal), ``BATCH_HOLD`` of them a hold of the
        writers' lock; answered once the last record is durable (their records go in the same
        group commits). A retried item gets its first answer from the retry cache."""
        _check_batch(items)
        if retries is not None and len(retries) != len(items):
            raise InvalidArgument(f"{len(retries)} call ids for {len(items)} items: one each, or none")
        self.ns.safemode.refuse(f"{what} {len(items)} paths")
        code, out = r.CODES[kind], []
        for start in range(0, len(items), BATCH_HOLD):
            with self.ns.lock:
                now = self.ns.wall_ms()
                for i in range(start, min(start + BATCH_HOLD, len(items))):
                    retry = retries[i] if retries is not None else None
                    try:
                        kept = self.ns.retry.lookup(retry, code, now) if retry is not None else MISS
                        if kept is MISS:
                            out.append(handler(items[i], retry))
                        else:
                            out.append(again(items[i], retry, kept) if again else kept)
                    except (NotActive, SafeModeRefusal):   # the whole call's, not one item's
                        raise
                    except NameNodeError as err:
                        out.append(err)
                seen = self.ns.journal.last
        self.ns.journal.wait_durable(seen)
        return out


def _check_batch(items: list) -> None:
    if len(items) > MAX_BATCH:
        raise InvalidArgument(f"a batch holds at most {MAX_BATCH} items, not {len(items)}")
