"""Chaos: the namespace invariant, beside "every stored byte reads back" (invariant.py).

The writers record every namespace operation they make (a put: create, write, complete; a
delete) with its outcome as the client saw it:

    ok        the call returned: acknowledged
    unknown   it failed with UNAVAILABLE (a NameNode died, a failover, etcd's answer lost): it may
              or may not have happened
    failed    any other error: it was refused, but a put may have left a file behind

At the end every acknowledged operation must be reflected in the listing of /chaos: a file whose
put was acknowledged and that no one tried to delete exists with its length (its bytes are the
final read check's); a file whose delete was acknowledged is gone; nothing is there that no
writer ever tried to create. Unknown and failed outcomes are allowed either way (counted).
Each function takes the run's ``Chaos`` object (runner.py).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from hedgefs.chaos.common import short
from hedgefs.client.errors import HedgefsError, Unavailable


@dataclasses.dataclass(frozen=True)
class Operation:
    op: str                               # put, append, truncate (size: the length it leaves), delete
    path: str
    outcome: str                          # ok, unknown, failed
    step: int
    size: int = 0
    error: str = ""


def outcome(err: BaseException | None) -> str:
    if err is None:
        return "ok"
    return "unknown" if isinstance(err, Unavailable) else "failed"


def record(chaos, op: str, path: str, err: BaseException | None, size: int = 0) -> None:
    entry = Operation(op, path, outcome(err), chaos.step, size, short(err) if err else "")
    with chaos.lock:
        chaos.journal.append(entry)


def check(chaos, root: str = "/chaos") -> list[str]:
    """Every acknowledged operation is reflected in the listing of ``root``."""
    with chaos.lock:
        journal = list(chaos.journal)
    r = chaos.report
    counts = Counter(e.outcome for e in journal)
    r.ns_acknowledged, r.ns_unknown, r.ns_failed = counts["ok"], counts["unknown"], counts["failed"]
    try:
        listing = {s.path: s for s in chaos.vfs.list(root, recursive=True) if not s.is_dir}
    except HedgefsError as err:
        return [f"namespace: listing {root} failed: {short(err)}"]
    by_path: dict[str, list[Operation]] = {}
    for e in journal:
        by_path.setdefault(e.path, []).append(e)
    problems = []
    for path, ops in sorted(by_path.items()):
        put = next((e for e in ops if e.op == "put"), None)
        deletes = [e for e in ops if e.op == "delete"]
        sized = [e for e in ops if e.op in ("put", "append", "truncate")]   # in the order made (one writer a path)
        last_ok = max((i for i, e in enumerate(sized) if e.outcome == "ok"), default=None)
        there = listing.get(path)
        if any(e.outcome == "ok" for e in deletes):
            if there is not None:
                problems.append(f"namespace: {path} was deleted (acknowledged, step "
                                f"{next(e.step for e in deletes if e.outcome == 'ok')}) and is back")
        elif not deletes and put is not None and put.outcome == "ok":
            last = sized[last_ok]
            may = {last.size} | {e.size for e in sized[last_ok + 1:]}   # later outcomes unknown: either
            if there is None:
                problems.append(f"namespace: {path} was written (acknowledged, step {put.step}) and is gone")
            elif there.length not in may:
                problems.append(f"namespace: {path} was {last.op} to {last.size} bytes (acknowledged, step "
                                f"{last.step}) and has {there.length}")
    problems += [f"namespace: {path} exists and no writer created it" for path in sorted(set(listing) - set(by_path))]
    r.ns_lost = len(problems)
    return problems
