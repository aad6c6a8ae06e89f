"""Bit rot on demand (the ``Rot`` RPC, for chaos runs and tests): flip one bit in each of a few
stored units, on disk, and say which, so a run can tell later whether each rotten copy is still
stored (the scrubber or a reader found it, and a repaired copy replaced it) without knowing how a
DataNode names its files."""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

from hedgefs.datanode.storage import BlockStore, UnitNotFound


@dataclass(frozen=True)
class Rotted:
    group_id: int
    index: int
    generation: int
    offset: int
    copy: str        # "<inode>:<length>" of the block file the bit was flipped in


def _copy(store: BlockStore, group_id: int, index: int, generation: int) -> tuple[str, int] | None:
    """The stored copy's identity (its block file's inode and size) and its path; None if absent."""
    try:
        path = store.block_path(group_id, index, generation=generation)
        st = os.stat(path)
    except (UnitNotFound, FileNotFoundError):
        return None
    return f"{st.st_ino}:{st.st_size}", path


def rot(store: BlockStore, units: int, seed: int) -> list[Rotted]:
    """Flip one bit in each of ``units`` non-empty stored units (fewer if fewer are stored)."""
    rng = random.Random(seed)
    stored = sorted((g, i, gen) for g, i, gen, length in store.units() if length > 0)
    out = []
    for g, i, gen in rng.sample(stored, min(units, len(stored))):
        found = _copy(store, g, i, gen)
        if found is None:
            continue           # deleted meanwhile
        copy, path = found
        try:
            with open(path, "r+b") as f:
                size = f.seek(0, os.SEEK_END)
                offset = rng.randrange(size)
                f.seek(offset)
                byte = f.read(1)[0]
                f.seek(offset)
                f.write(bytes([byte ^ (1 << rng.randrange(8))]))
        except FileNotFoundError:
            continue
        out.append(Rotted(g, i, gen, offset, copy))
    return out


def still_stored(store: BlockStore, rotted: list[Rotted]) -> list[Rotted]:
    """Those of ``rotted`` whose very copy is still the stored one."""
    return [r for r in rotted if (_copy(store, r.group_id, r.index, r.generation) or ("",))[0] == r.copy]
