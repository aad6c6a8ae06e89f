"""Striping math: where every byte of an erasure-coded file lives. Pure functions, no I/O.

HDFS's vocabulary (``StripedBlockUtil``), used the same way everywhere in hedgefs (proto, NameNode,
DataNode, client):

  cell            ``cell_size`` bytes, the grain of striping
  stripe          k data cells + m parity cells, one per unit, at the same offset of every
                  internal block of a group
  block group     k + m units; at most ``block_size`` bytes per internal block, so at most
                  ``k * block_size`` file bytes; then the next group starts
  unit            one of a group's k + m members: data units, then parity units
  unit index      a unit's position, 0..k-1 data, k..k+m-1 parity; in code always ``index``.
                  For ``LRC-k-l-g`` (m = l + g): 0..k-1 data, k..k+l-1 local parities (unit
                  k + j is the XOR of local group j, data units j*k/l..(j+1)*k/l - 1), then
                  k+l..k+l+g-1 global parities (``ec/lrc.py``). LRC-6-2-2: data 0-5, groups
                  {0,1,2 | 6} and {3,4,5 | 7}, globals 8 and 9
  local group     LRC only: k / l data units and their local parity; one lost member is
                  rebuilt from the other k / l
  internal block  a unit's bytes: its cells of every stripe of the group, back to back, stored on
                  one DataNode and named (group id, index)
  replica         a unit of a replicated policy (``REPLICATE-n``: k = 1, m = n - 1): every unit
                  of its group holds the same bytes, so each is a full copy of the group's data,
                  which users call a *block* (HDFS's word for a replicated file's block). The
                  math below holds unchanged: with k = 1 the data unit's internal block is the
                  group's data, byte for byte (``offset_in_block == offset_in_group``)

File bytes are dealt round-robin in cells: cell i of a block group's data goes to data unit
``i mod k``, stripe ``i div k`` (stripes restart at 0 in each group). RS(3,2), 6.5 cells:

                  unit 0    unit 1    unit 2    unit 3    unit 4
                +---------+---------+---------+---------+---------+
     stripe 0   | cell 0  | cell 1  | cell 2  | P       | P       |   offset_in_block 0
     stripe 1   | cell 3  | cell 4  | cell 5  | P       | P       |   offset_in_block cell_size
     stripe 2   | c6 |    | (0 B)   | (0 B)   | P  |    | P  |    |   short last stripe
                +---------+---------+---------+---------+---------+
                 internal  internal  internal  internal  internal
                 block 0   block 1   block 2   block 3   block 4

Short last stripe: each data cell is as long as the data in it (possibly 0 bytes); each parity
cell is as long as the stripe's longest data cell, its first. The codec treats missing bytes as
zeros. Every length therefore follows from the group's data length alone.

Only the last stripe of a group can be short, so stripe s of any internal block starts at
``s * cell_size`` in that block.

Zero units: a group of one short stripe (a file of at most k - 1 cells, or the tail group of
one) leaves data units empty (as units 1 and 2 of stripe 2 above, were it the group's only stripe), and for LRC
the local parity of a local group whose data units are all empty is zeros too. Their bytes are
known from the group's length alone, so they are never written, stored, expected by the NameNode,
read or repaired (``zero_units``): a 10-byte RS-6-3 file is units 0, 6, 7 and 8, and any 3 of those
4 may be lost, as any 3 of 9 may be for a full group.

Offsets are named by what they are relative to: ``offset_in_file``, ``offset_in_group`` (data
bytes of the group, in file order), ``offset_in_block`` (inside one internal block),
``offset_in_cell``. All ranges are half-open: ``(offset, length)`` is bytes
``[offset, offset + length)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

from hedgefs.ec.policy import Policy


@dataclass(frozen=True)
class GroupRange:
    """The part ``[offset_in_group, offset_in_group + length)`` of block group ``group_index``."""

    group_index: int
    offset_in_group: int
    length: int
    offset_in_file: int


@dataclass(frozen=True)
class CellRange:
    """``length`` bytes of the cell of unit ``index`` in ``stripe``, from ``offset_in_cell``.

    ``offset_in_block`` is where they are in the unit's internal block; ``offset_in_group`` is
    where they are in the group's data.
    """

    stripe: int
    index: int
    offset_in_cell: int
    length: int
    offset_in_block: int
    offset_in_group: int


@dataclass(frozen=True)
class UnitRange:
    """What one data unit contributes to a group data range: one contiguous range of its
    internal block, ``[offset_in_block, offset_in_block + length)``, made of ``cells`` in order.

    Contiguous because a unit's cells of consecutive stripes sit back to back in its block, and a
    contiguous data range takes a suffix of the unit's first cell and a prefix of its last.
    """

    index: int
    offset_in_block: int
    length: int
    cells: tuple[CellRange, ...]


@dataclass(frozen=True)
class StripeInfo:
    """One stripe of a group: where it starts and how long each unit's cell is.

    ``cell_lengths`` has k + m entries; ``cell_length`` (= the first data cell's length) is the
    length of every parity cell and the length to encode or decode the stripe with.
    """

    stripe: int
    offset_in_group: int
    offset_in_block: int
    data_length: int
    cell_lengths: tuple[int, ...]

    @property
    def cell_length(self) -> int:
        return self.cell_lengths[0]


def _non_negative(**values: int) -> None:
    for name, value in values.items():
        if value < 0:
            raise ValueError(f"{name} must be >= 0 (got {value})")


def check_block_size(policy: Policy, block_size: int) -> None:
    """Raise ValueError unless block_size is a positive multiple of the policy's cell size."""
    if block_size <= 0 or block_size % policy.cell_size:
        raise ValueError(
            f"block size {block_size} is not a positive multiple of the cell size {policy.cell_size}"
        )


def block_size_for(policy: Policy, default_block_size: int) -> int:
    """The block size a new file of ``policy`` gets from a NameNode whose default is
    ``default_block_size``: rounded down to whole cells, at least one cell."""
    return max(policy.cell_size, default_block_size // policy.cell_size * policy.cell_size)


def group_data_size(policy: Policy, block_size: int) -> int:
    """Data bytes in a full block group: k * block_size."""
    check_block_size(policy, block_size)
    return policy.k * block_size


# --- file -> block groups -------------------------------------------------------------------


def group_lengths(file_length: int, policy: Policy, block_size: int) -> list[int]:
    """Data bytes of each block group of a file; a 0-byte file has no groups."""
    full_group = group_data_size(policy, block_size)
    _non_negative(file_length=file_length)
    full, rest = divmod(file_length, full_group)
    return [full_group] * full + ([rest] if rest else [])


def file_range_to_groups(
    offset: int, length: int, policy: Policy, block_size: int, file_length: int
) -> list[GroupRange]:
    """Split a file range into per-group ranges, clamped to the file's end (as a read is)."""
    _non_negative(offset=offset, length=length, file_length=file_length)
    full_group = group_data_size(policy, block_size)
    end = min(offset + length, file_length)
    ranges = []
    pos = offset
    while pos < end:
        group_index, offset_in_group = divmod(pos, full_group)
        n = min(full_group - offset_in_group, end - pos)
        ranges.append(GroupRange(group_index, offset_in_group, n, pos))
        pos += n
    return ranges


# --- one block group: stripes, cells, internal blocks ---------------------------------------


def num_stripes(policy: Policy, group_length: int) -> int:
    """Stripes in a group holding ``group_length`` data bytes (the last one may be short)."""
    _non_negative(group_length=group_length)
    return -(-group_length // policy.stripe_data_size)


def cell_length(policy: Policy, group_length: int, stripe: int, index: int) -> int:
    """Bytes in the cell of unit ``index`` (data or parity) in ``stripe``; 0 past the group's end."""
    _non_negative(group_length=group_length, stripe=stripe, index=index)
    if index >= policy.units:
        raise ValueError(f"unit index {index} out of range for {policy.name}")
    data_unit = index if index < policy.k else 0  # parity cells are as long as the first data cell
    start = stripe * policy.stripe_data_size + data_unit * policy.cell_size
    return max(0, min(policy.cell_size, group_length - start))


def unit_length(policy: Policy, group_length: int, index: int) -> int:
    """Length of unit ``index``'s internal block in a group holding ``group_length`` data bytes."""
    _non_negative(group_length=group_length, index=index)
    if index >= policy.units:
        raise ValueError(f"unit index {index} out of range for {policy.name}")
    full_stripes, rest = divmod(group_length, policy.stripe_data_size)
    data_unit = index if index < policy.k else 0
    last = max(0, min(policy.cell_size, rest - data_unit * policy.cell_size))
    return full_stripes * policy.cell_size + last


def zero_units(policy: Policy, group_length: int) -> frozenset[int]:
    """The units of a group holding ``group_length`` data bytes that are zeros by the layout alone
    (module docstring): empty data units, and the local parities of LRC local groups whose data
    units are all empty. None for a replicated policy, a group of more than k - 1 cells, or one
    of no bytes (nothing of it is stored at all)."""
    _non_negative(group_length=group_length)
    if policy.replicated or group_length == 0:
        return frozenset()
    return _zero_units(policy, min(policy.k, -(-group_length // policy.cell_size)))


@lru_cache(maxsize=1024)
def _zero_units(policy: Policy, data_units: int) -> frozenset[int]:
    """The zero units of a group whose first ``data_units`` data units hold bytes."""
    k, l = policy.k, policy.local_groups
    zeros = set(range(data_units, k))
    if l:
        per_group = k // l
        zeros.update(k + j for j in range(l) if j * per_group >= data_units)
    return frozenset(zeros)


def unit_lengths(policy: Policy, group_length: int) -> list[int]:
    """Lengths of all k + m internal blocks of a group."""
    return [unit_length(policy, group_length, index) for index in range(policy.units)]


def stripe_info(policy: Policy, group_length: int, stripe: int) -> StripeInfo:
    lengths = tuple(cell_length(policy, group_length, stripe, u) for u in range(policy.units))
    offset_in_group = stripe * policy.stripe_data_size
    data_length = max(0, min(policy.stripe_data_size, group_length - offset_in_group))
    return StripeInfo(stripe, offset_in_group, stripe * policy.cell_size, data_length, lengths)


def iter_stripes(policy: Policy, group_length: int) -> Iterator[StripeInfo]:
    """Every stripe of a group in order: what a striped writer encodes and a repair worker
    rebuilds, stripe by stripe."""
    for stripe in range(num_stripes(policy, group_length)):
        yield stripe_info(policy, group_length, stripe)


def block_bytes_held(policy: Policy, group_length: int, index: int, offset_in_block: int, length: int) -> int:
    """How many of the bytes ``[offset_in_block, offset_in_block + length)`` of a unit's internal
    block exist (0..length). Past the block's end every unit is implicitly zeros, so a range of
    several stripes decodes column by column like a single stripe does."""
    _non_negative(offset_in_block=offset_in_block, length=length)
    return max(0, min(length, unit_length(policy, group_length, index) - offset_in_block))


def group_range_to_units(policy: Policy, group_length: int, offset: int, length: int) -> list[UnitRange]:
    """The data units that the group data range ``[offset, offset + length)`` touches, each with
    the one contiguous block range it contributes, in unit order."""
    by_unit: dict[int, list[CellRange]] = {}
    for cell in group_range_to_cells(policy, group_length, offset, length):
        by_unit.setdefault(cell.index, []).append(cell)
    ranges = []
    for index in sorted(by_unit):
        cells = by_unit[index]
        start = cells[0].offset_in_block
        ranges.append(UnitRange(index, start, cells[-1].offset_in_block + cells[-1].length - start, tuple(cells)))
    return ranges


def group_range_to_cells(
    policy: Policy, group_length: int, offset: int, length: int
) -> list[CellRange]:
    """The cells that the group data range ``[offset, offset + length)`` touches, in data order.

    The range must lie inside the group's data.
    """
    _non_negative(offset=offset, length=length)
    end = offset + length
    if end > group_length:
        raise ValueError(f"range [{offset}, {end}) is past the group's data length {group_length}")
    cell_size, k = policy.cell_size, policy.k
    cells = []
    pos = offset
    while pos < end:
        cell_in_group = pos // cell_size
        stripe, index = divmod(cell_in_group, k)
        offset_in_cell = pos - cell_in_group * cell_size
        n = min(cell_size - offset_in_cell, end - pos)
        cells.append(
            CellRange(stripe, index, offset_in_cell, n, stripe * cell_size + offset_in_cell, pos)
        )
        pos += n
    return cells


def split_stripe(policy: Policy, stripe_data: bytes | bytearray | memoryview) -> list[memoryview]:
    """Deal one stripe's data (at most k * cell_size bytes) into its k data cells (zero-copy).

    Cells past the data are empty; the codec zero-pads short cells.
    """
    view = memoryview(stripe_data).cast("B")
    if len(view) > policy.stripe_data_size:
        raise ValueError(
            f"stripe data is {len(view)} bytes, more than {policy.stripe_data_size} for {policy.name}"
        )
    c = policy.cell_size
    return [view[u * c:(u + 1) * c] for u in range(policy.k)]
