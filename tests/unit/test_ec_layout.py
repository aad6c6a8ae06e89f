"""Striping math, HDFS TestStripedBlockUtil-style.

A tiny policy, RS(3,2) with 16-byte cells and 64-byte internal blocks (4 stripes, 192 data bytes
per block group), makes every boundary a few bytes away. File data is ``byte = f(offset)`` so
every expected byte is computable. For each file length below, the internal blocks are built
byte by byte straight from the definition (file cell i -> unit i mod k, stripe i div k, block
group after k * block_size bytes) and compared with the layout functions; then every
(offset, length) read is mapped through the layout and checked byte for byte.

Boundary cases (file lengths; cell = 16, stripe = 48, group = 192):

    0 B                     no block group at all
    1 B                     one byte in unit 0; parity cells 1 byte
    cell - 1, cell, cell+1  15, 16, 17: second data cell empty / starts
    stripe - 1, stripe,     47, 48, 49: last data cell one short / full / next stripe opens
    stripe + 1
    several stripes         96 (2 full), 100 (2 full + 4 B)
    last partial stripe     136 (2 stripes + 2 cells + 8 B: unit 2 empty, parity 16 B)
    full group - 1, group   191, 192
    group + 1               193: a second group of 1 byte
    several groups          434 (2 full groups + 50 B)
"""

import itertools

import pytest

from hedgefs.ec.codec import get_codec
from hedgefs.ec.layout import (
    CellRange,
    GroupRange,
    block_bytes_held,
    cell_length,
    check_block_size,
    file_range_to_groups,
    group_data_size,
    group_lengths,
    group_range_to_cells,
    group_range_to_units,
    iter_stripes,
    num_stripes,
    split_stripe,
    stripe_info,
    unit_length,
    unit_lengths,
    zero_units,
)
from hedgefs.ec.policy import Policy, parse_policy

TINY = Policy(k=3, m=2, cell_size=16)
BLOCK = 64
GROUP = TINY.k * BLOCK  # 192
LENGTHS = [0, 1, 15, 16, 17, 47, 48, 49, 96, 100, 136, 191, 192, 193, 434]
EXHAUSTIVE_UP_TO = 200  # every (offset, length) for files this small; boundary samples beyond


def f(offset: int) -> int:
    return (offset * 131 + offset // 256 * 7 + 11) % 256


def file_data(length: int) -> bytes:
    return bytes(f(o) for o in range(length))


def naive_blocks(length: int, policy: Policy = TINY, block_size: int = BLOCK):
    """Data internal blocks and per-cell byte counts, placed byte by byte from the definition."""
    k, cell = policy.k, policy.cell_size
    blocks: dict[tuple[int, int], bytearray] = {}
    counts: dict[tuple[int, int, int], int] = {}
    for o in range(length):
        group, in_group = divmod(o, k * block_size)
        cell_index = in_group // cell
        stripe, unit = divmod(cell_index, k)
        block = blocks.setdefault((group, unit), bytearray())
        assert len(block) == stripe * cell + in_group % cell  # cells back to back
        block.append(f(o))
        counts[group, stripe, unit] = counts.get((group, stripe, unit), 0) + 1
    return blocks, counts


def layout_blocks(length: int, policy: Policy = TINY, block_size: int = BLOCK):
    """All k + m internal blocks per group, built the way a striped writer would."""
    data = file_data(length)
    codec = get_codec(policy.k, policy.m, "numpy")
    groups = []
    group_offset = 0
    for group_length in group_lengths(length, policy, block_size):
        blocks = [bytearray() for _ in range(policy.units)]
        for info in iter_stripes(policy, group_length):
            start = group_offset + info.offset_in_group
            cells = split_stripe(policy, data[start:start + info.data_length])
            parity = codec.encode(cells)
            for unit, cell in enumerate(list(cells) + [p.tobytes() for p in parity]):
                assert len(cell) == info.cell_lengths[unit]
                assert len(blocks[unit]) == info.offset_in_block
                blocks[unit] += cell
        groups.append(blocks)
        group_offset += group_length
    return groups


@pytest.mark.parametrize("length", LENGTHS)
def test_lengths_match_the_definition(length):
    naive, counts = naive_blocks(length)
    lengths = group_lengths(length, TINY, BLOCK)
    assert sum(lengths) == length
    assert len(lengths) == -(-length // GROUP)
    assert all(0 < g <= GROUP for g in lengths)
    for group, group_length in enumerate(lengths):
        assert num_stripes(TINY, group_length) == -(-group_length // TINY.stripe_data_size)
        for unit in range(TINY.k):
            expected = len(naive.get((group, unit), b""))
            assert unit_length(TINY, group_length, unit) == expected
        for unit in range(TINY.k, TINY.units):  # parity blocks are as long as data unit 0's
            assert unit_length(TINY, group_length, unit) == len(naive[group, 0])
        assert unit_lengths(TINY, group_length) == [
            unit_length(TINY, group_length, u) for u in range(TINY.units)
        ]
        for stripe in range(num_stripes(TINY, group_length) + 1):
            for unit in range(TINY.units):
                data_unit = unit if unit < TINY.k else 0
                assert cell_length(TINY, group_length, stripe, unit) == counts.get(
                    (group, stripe, data_unit), 0
                )


@pytest.mark.parametrize("length", LENGTHS)
def test_internal_blocks_built_from_layout_equal_the_definition(length):
    naive, _ = naive_blocks(length)
    groups = layout_blocks(length)
    assert len(groups) == len(group_lengths(length, TINY, BLOCK))
    for group, blocks in enumerate(groups):
        for unit in range(TINY.k):
            assert bytes(blocks[unit]) == bytes(naive.get((group, unit), b""))
        for unit, block in enumerate(blocks):
            assert len(block) == unit_length(TINY, len_of_group(length, group), unit)


def len_of_group(length: int, group: int) -> int:
    return group_lengths(length, TINY, BLOCK)[group]


def _ranges(length: int):
    if length <= EXHAUSTIVE_UP_TO:
        return ((o, n) for o in range(length + 2) for n in range(length + 3 - o))
    edges = sorted({0, 1, 15, 16, 17, 47, 48, 49, 191, 192, 193, 383, 384, 385, length - 1, length})
    return ((o, n) for o in edges for n in range(length + 2 - o))


@pytest.mark.parametrize("length", LENGTHS)
def test_every_read_range_maps_to_the_right_bytes(length):
    data = file_data(length)
    groups = layout_blocks(length)
    lengths = group_lengths(length, TINY, BLOCK)
    for offset, n in _ranges(length):
        got = bytearray()
        expected_file_offset = offset
        for piece in file_range_to_groups(offset, n, TINY, BLOCK, length):
            assert piece.offset_in_file == expected_file_offset
            assert piece.offset_in_file == piece.group_index * GROUP + piece.offset_in_group
            assert piece.length > 0
            group_length = lengths[piece.group_index]
            expected_group_offset = piece.offset_in_group
            for cell in group_range_to_cells(TINY, group_length, piece.offset_in_group, piece.length):
                assert cell.offset_in_group == expected_group_offset
                assert cell.offset_in_block == cell.stripe * TINY.cell_size + cell.offset_in_cell
                assert 0 < cell.length <= TINY.cell_size - cell.offset_in_cell
                assert cell.index < TINY.k
                assert cell.offset_in_cell + cell.length <= cell_length(
                    TINY, group_length, cell.stripe, cell.index
                )
                block = groups[piece.group_index][cell.index]
                got += block[cell.offset_in_block:cell.offset_in_block + cell.length]
                expected_group_offset += cell.length
            expected_file_offset += piece.length
        assert bytes(got) == data[offset:offset + n], (offset, n)


@pytest.mark.parametrize("length", [1, 17, 49, 100, 136, 192, 434])
def test_rebuild_any_cell_range_from_k_units_reading_only_held_bytes(length):
    """What a hedged read does: the same in-cell range from k other units, each read only as far
    as it holds bytes, zero-padded by the codec."""
    codec = get_codec(TINY.k, TINY.m)
    groups = layout_blocks(length)
    for group_length, blocks in zip(group_lengths(length, TINY, BLOCK), groups):
        for info in iter_stripes(TINY, group_length):
            for a, b in [(0, 16), (0, 1), (3, 9), (7, 16), (15, 16), (0, info.cell_length)]:
                if b > info.cell_length or a >= b:
                    continue
                for lost in itertools.combinations(range(TINY.units), TINY.m):
                    units = {}
                    for unit in range(TINY.units):
                        if unit in lost:
                            continue
                        held = block_bytes_held(TINY, group_length, unit, info.offset_in_block + a, b - a)
                        start = info.offset_in_block + a
                        units[unit] = bytes(blocks[unit][start:start + held])
                        assert len(units[unit]) == held
                    rebuilt = codec.decode(units, lost, b - a)
                    for unit in lost:
                        held = block_bytes_held(TINY, group_length, unit, info.offset_in_block + a, b - a)
                        start = info.offset_in_block + a
                        assert rebuilt[unit][:held].tobytes() == bytes(blocks[unit][start:start + held])
                        assert not rebuilt[unit][held:].any()  # past a short cell: zeros


@pytest.mark.parametrize("length", [49, 136, 193, 434])
def test_repair_rebuilds_whole_internal_blocks_stripe_by_stripe(length):
    codec = get_codec(TINY.k, TINY.m)
    for group_length, blocks in zip(group_lengths(length, TINY, BLOCK), layout_blocks(length)):
        for target in range(TINY.units):
            sources = [u for u in range(TINY.units) if u != target][: TINY.k]
            rebuilt = bytearray()
            for info in iter_stripes(TINY, group_length):
                units = {
                    u: blocks[u][info.offset_in_block:info.offset_in_block + info.cell_lengths[u]]
                    for u in sources
                }
                out = codec.decode(units, [target], info.cell_length)[target]
                rebuilt += out[: info.cell_lengths[target]].tobytes()
            assert rebuilt == blocks[target]
            assert len(rebuilt) == unit_length(TINY, group_length, target)


def test_short_last_stripe_cell_lengths():
    # 136 = 2 full stripes (96) + 40: cells 16, 16, 8; parity 16.
    info = stripe_info(TINY, 136, 2)
    assert info.cell_lengths == (16, 16, 8, 16, 16)
    assert info.data_length == 40 and info.offset_in_group == 96 and info.offset_in_block == 32
    # 100 = 96 + 4: cells 4, 0, 0; parity 4.
    assert stripe_info(TINY, 100, 2).cell_lengths == (4, 0, 0, 4, 4)
    assert stripe_info(TINY, 100, 2).cell_length == 4
    # Past the end of the data: all empty.
    assert stripe_info(TINY, 100, 3).cell_lengths == (0,) * 5
    assert [s.stripe for s in iter_stripes(TINY, 100)] == [0, 1, 2]
    assert list(iter_stripes(TINY, 0)) == []


def test_block_bytes_held_clamps_to_the_block():
    # group of 100 bytes: stripe 2 (block offset 32) has unit 0 = 4 bytes, unit 1 = 0, parity 4.
    assert block_bytes_held(TINY, 100, 0, 32, 16) == 4
    assert block_bytes_held(TINY, 100, 0, 34, 16) == 2
    assert block_bytes_held(TINY, 100, 0, 36, 16) == 0
    assert block_bytes_held(TINY, 100, 0, 41, 3) == 0
    assert block_bytes_held(TINY, 100, 1, 32, 16) == 0
    assert block_bytes_held(TINY, 100, 3, 33, 2) == 2
    assert block_bytes_held(TINY, 100, 2, 21, 8) == 8


def test_file_range_to_groups_clamps_at_end_of_file():
    assert file_range_to_groups(0, 0, TINY, BLOCK, 434) == []
    assert file_range_to_groups(434, 10, TINY, BLOCK, 434) == []
    assert file_range_to_groups(500, 10, TINY, BLOCK, 434) == []
    assert file_range_to_groups(430, 10, TINY, BLOCK, 434) == [GroupRange(2, 46, 4, 430)]
    assert file_range_to_groups(190, 200, TINY, BLOCK, 434) == [
        GroupRange(0, 190, 2, 190),
        GroupRange(1, 0, 192, 192),
        GroupRange(2, 0, 6, 384),
    ]


def test_group_range_to_cells_example():
    assert group_range_to_cells(TINY, 136, 14, 20) == [
        CellRange(stripe=0, index=0, offset_in_cell=14, length=2, offset_in_block=14, offset_in_group=14),
        CellRange(stripe=0, index=1, offset_in_cell=0, length=16, offset_in_block=0, offset_in_group=16),
        CellRange(stripe=0, index=2, offset_in_cell=0, length=2, offset_in_block=0, offset_in_group=32),
    ]
    assert group_range_to_cells(TINY, 136, 130, 6) == [
        CellRange(stripe=2, index=2, offset_in_cell=2, length=6, offset_in_block=34, offset_in_group=130),
    ]
    assert group_range_to_cells(TINY, 136, 136, 0) == []


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        group_range_to_cells(TINY, 100, 90, 11)  # past the group's data
    with pytest.raises(ValueError):
        group_range_to_cells(TINY, 100, -1, 2)
    with pytest.raises(ValueError):
        file_range_to_groups(-1, 2, TINY, BLOCK, 100)
    with pytest.raises(ValueError):
        cell_length(TINY, 100, 0, 5)  # unit 5 of RS(3,2)
    with pytest.raises(ValueError):
        unit_length(TINY, 100, 5)
    with pytest.raises(ValueError):
        group_lengths(-1, TINY, BLOCK)
    for bad_block in (0, -16, 24):  # not a positive multiple of the cell
        with pytest.raises(ValueError):
            check_block_size(TINY, bad_block)
        with pytest.raises(ValueError):
            group_lengths(100, TINY, bad_block)
    with pytest.raises(ValueError):
        split_stripe(TINY, bytes(49))


def test_split_stripe_is_zero_copy_and_short_at_the_end():
    data = bytearray(range(40))
    cells = split_stripe(TINY, data)
    assert [len(c) for c in cells] == [16, 16, 8]
    data[17] = 255
    assert cells[1][1] == 255
    assert [len(c) for c in split_stripe(TINY, b"")] == [0, 0, 0]


# --- real policies: size arithmetic ---------------------------------------------------------

MIB = 1 << 20
BLOCK_128M = 128 * MIB


def test_rs_6_3_1024k_sizes():
    policy = parse_policy("RS-6-3-1024k")
    assert group_data_size(policy, BLOCK_128M) == 768 * MIB
    assert group_lengths(0, policy, BLOCK_128M) == []
    assert group_lengths(1, policy, BLOCK_128M) == [1]
    assert group_lengths(1024 * MIB, policy, BLOCK_128M) == [768 * MIB, 256 * MIB]
    # 256 MiB = 42 full stripes (252 MiB) + 4 full cells: units 0-3 hold 43 cells, 4-5 hold 42.
    assert num_stripes(policy, 256 * MIB) == 43
    assert unit_lengths(policy, 256 * MIB) == [43 * MIB] * 4 + [42 * MIB] * 2 + [43 * MIB] * 3
    assert unit_lengths(policy, 768 * MIB) == [128 * MIB] * 9
    # One byte: unit 0 holds it, parity cells are one byte, the rest are empty.
    assert unit_lengths(policy, 1) == [1, 0, 0, 0, 0, 0, 1, 1, 1]
    # 6 MiB + 1 byte: a second stripe with one byte.
    assert unit_lengths(policy, 6 * MIB + 1) == [MIB + 1] + [MIB] * 5 + [MIB + 1] * 3
    assert stripe_info(policy, 6 * MIB + 1, 1).cell_lengths == (1, 0, 0, 0, 0, 0, 1, 1, 1)
    # File offset 1 GiB - 1 is in group 1, stripe 42, unit 3, last byte of the cell.
    (piece,) = file_range_to_groups(1024 * MIB - 1, 5, policy, BLOCK_128M, 1024 * MIB)
    assert piece == GroupRange(1, 256 * MIB - 1, 1, 1024 * MIB - 1)
    (cell,) = group_range_to_cells(policy, 256 * MIB, piece.offset_in_group, 1)
    assert (cell.stripe, cell.index, cell.offset_in_cell) == (42, 3, MIB - 1)
    assert cell.offset_in_block == 43 * MIB - 1


def test_rs_10_4_and_small_cells_sizes():
    policy = parse_policy("RS-10-4-1024k")
    assert policy.stripe_data_size == 10 * MIB
    # 25 MiB + 5 = 2 full stripes + 5 full cells + 5 bytes in unit 5.
    assert unit_lengths(policy, 25 * MIB + 5)[:6] == [3 * MIB] * 5 + [2 * MIB + 5]
    assert unit_lengths(policy, 25 * MIB + 5)[6:] == [2 * MIB] * 4 + [3 * MIB] * 4
    small = parse_policy("RS-3-2-64k")
    assert group_lengths(10 * MIB, small, 2 * MIB) == [6 * MIB, 4 * MIB]
    assert num_stripes(small, 4 * MIB) == -(-4 * MIB // (192 * 1024))
    assert sum(unit_lengths(small, 4 * MIB)[:3]) == 4 * MIB


# --- unit ranges: what the reader asks each DataNode for ---------------------------------------


@pytest.mark.parametrize("group_length", [0, 1, 15, 16, 17, 47, 48, 49, 100, 143, 144, 192])
def test_unit_ranges_are_contiguous_and_cover_exactly_the_cells(group_length):
    from hedgefs.ec.layout import block_bytes_held, group_range_to_cells, group_range_to_units, unit_length

    policy = Policy(k=3, m=2, cell_size=16)
    for offset in range(group_length + 1):
        for length in range(group_length - offset + 1):
            ranges = group_range_to_units(policy, group_length, offset, length)
            cells = group_range_to_cells(policy, group_length, offset, length)
            assert sorted((c for r in ranges for c in r.cells), key=lambda c: c.offset_in_group) == cells
            for r in ranges:
                covered = [b for c in r.cells for b in range(c.offset_in_block, c.offset_in_block + c.length)]
                assert covered == list(range(r.offset_in_block, r.offset_in_block + r.length))
                assert block_bytes_held(policy, group_length, r.index, r.offset_in_block, r.length) == r.length
    for unit in range(policy.units):
        ul = unit_length(policy, group_length, unit)
        assert block_bytes_held(policy, group_length, unit, 0, ul + 5) == ul
        assert block_bytes_held(policy, group_length, unit, ul, 7) == 0


@pytest.mark.parametrize("length", [0, 1, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 << 20])
def test_a_replicated_block_is_its_data_byte_for_byte(length):
    """REPLICATE-3 (k = 1): every unit is the whole block; any range of the block's data is the
    same range of any unit's internal block."""
    policy = parse_policy("REPLICATE-3")
    assert unit_lengths(policy, length) == [length] * 3
    assert group_data_size(policy, 4 << 20) == 4 << 20
    for offset, n in [(0, length), (length // 3, length // 2), (max(0, length - 1), min(1, length))]:
        ranges = group_range_to_units(policy, length, offset, n)
        if n:
            assert [(r.index, r.offset_in_block, r.length) for r in ranges] == [(0, offset, n)]
        else:
            assert ranges == []


# --- zero units: what a short group never stores -------------------------------------------


@pytest.mark.parametrize("name, length, zeros", [
    ("RS-6-3-1024k", 10, {1, 2, 3, 4, 5}),
    ("RS-6-3-1024k", 1 << 20, {1, 2, 3, 4, 5}),            # exactly one cell
    ("RS-6-3-1024k", (1 << 20) + 1, {2, 3, 4, 5}),
    ("RS-6-3-1024k", 5 << 20, {5}),                         # k - 1 cells
    ("RS-6-3-1024k", (5 << 20) + 1, set()),
    ("RS-6-3-1024k", 6 << 20, set()),                       # k cells: a whole stripe
    ("RS-6-3-1024k", (6 << 20) + 1, set()),                 # k cells + 1: a second stripe
    ("RS-6-3-1024k", 0, set()),                             # no group at all
    ("REPLICATE-3", 10, set()),
    ("LRC-6-2-2-64k", 10, {1, 2, 3, 4, 5, 7}),              # local group 1 empty: its parity too
    ("LRC-6-2-2-64k", 3 * 65536, {3, 4, 5, 7}),
    ("LRC-6-2-2-64k", 3 * 65536 + 1, {4, 5}),
])
def test_zero_units_of_a_short_group(name, length, zeros):
    assert zero_units(parse_policy(name), length) == zeros


@pytest.mark.parametrize("policy", [TINY, Policy(6, 3, 4), Policy(6, 4, 4, local_groups=2), Policy(1, 2, 4, replicated=True)],
                         ids=lambda p: p.name)
def test_zero_units_hold_only_zeros_and_the_rest_keep_the_tolerance(policy):
    """For every group length up to two stripes: each zero unit's encoded cells are empty or all
    zeros, every other unit holds a byte that is not known from the length alone (a data unit
    with data, a parity unit), and losing any ``tolerance`` of the stored units still decodes."""
    from hedgefs.ec.codec import codec_for

    codec = codec_for(policy)
    for length in range(1, 2 * policy.stripe_data_size + 2):
        zeros = zero_units(policy, length)
        data = bytes(1 + o % 255 for o in range(length))   # no zero byte: a zero cell is a zero unit's
        info = stripe_info(policy, length, 0)
        cells = split_stripe(policy, data[:info.data_length])
        encoded = list(cells) + [bytes(p) for p in codec.encode(cells)]
        for index in range(policy.units):
            cell = bytes(encoded[index])
            if index in zeros:
                assert not any(cell), (policy.name, length, index)
            elif index < policy.k:
                assert unit_length(policy, length, index) > 0, (policy.name, length, index)
        stored = [i for i in range(policy.units) if i not in zeros]
        for lost in itertools.combinations(stored, min(policy.tolerance, len(stored) - 1)):
            assert policy.decodable(set(stored) - set(lost) | zeros), (policy.name, length, lost)
