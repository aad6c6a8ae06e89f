"""LRC(k, l, g): parity against a by-hand reference, every erasure pattern of up to 4 lost units,
local repair from the group, and the cheapest-source planner (ec/sources.py) for every policy.

Erasure patterns of LRC-6-2-2 (10 units), each either decoded byte-exact or refused with
``Undecodable``:

  lost   patterns   decodable
   1        10         10
   2        45         45
   3       120        120     every 3-loss pattern (Azure's guarantee)
   4       210        180     85.7 % (the paper's "86 %"); the 30 others lose a group and its
                              local parity with too few global parities left, undecodable by any
                              code of this shape
"""

import itertools

import numpy as np
import pytest

from hedgefs.ec import lrc, sources
from hedgefs.ec.backend_numpy import MUL
from hedgefs.ec.codec import LrcCodec, available_backends, codec_for
from hedgefs.ec.gf256 import EXP
from hedgefs.ec.policy import parse_policy
from hedgefs.ec.sources import Undecodable

LRC622 = parse_policy("LRC-6-2-2-64k")
RS63 = parse_policy("RS-6-3-64k")
REP3 = parse_policy("REPLICATE-3")
BACKENDS = available_backends()


def random_cells(k, length, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, length, dtype=np.uint8) for _ in range(k)]


def reference_parity(k, l, g, cells):
    """Local parity j = XOR of group j; global t = sum_i (2^i)^(t+1) * d_i, by table lookups."""
    size = k // l
    local = [np.bitwise_xor.reduce(cells[j * size:(j + 1) * size]) for j in range(l)]
    glob = []
    for t in range(g):
        acc = np.zeros_like(cells[0])
        for i, cell in enumerate(cells):
            c = 1
            for _ in range(t + 1):
                c = int(MUL[c, EXP[i]])
            acc ^= MUL[c][cell]
        glob.append(acc)
    return local + glob


def all_units(policy, length, seed=1, backend=None):
    data = random_cells(policy.k, length, seed)
    return data + codec_for(policy, backend).encode(data)


def undecodable_by_shape(k, l, g, lost):
    """Any code of this shape loses data when a pattern needs more than the surviving parity can
    give: per group, every loss beyond the first; against the surviving global parities."""
    beyond = sum(max(0, sum(1 for u in lost if lrc.group_of(k, l, u) == j) - 1) for j in range(l))
    return beyond > g - sum(1 for u in lost if u >= k + l)


# --- the code ---------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["LRC-6-2-2-64k", "LRC-12-2-2-64k", "LRC-6-3-3-64k", "LRC-6-1-1-64k"])
@pytest.mark.parametrize("length", [0, 1, 2, 97, 4096])
def test_parity_is_group_xor_and_azure_global_rows(backend, name, length):
    policy = parse_policy(name)
    cells = random_cells(policy.k, length)
    parity = codec_for(policy, backend).encode(cells)
    expected = reference_parity(policy.k, policy.local_groups, policy.global_parities, cells)
    assert [p.tobytes() for p in parity] == [e.tobytes() for e in expected]


def test_codec_for_lrc_is_shared_and_rs_and_replicate_are_unchanged():
    assert isinstance(codec_for(LRC622), LrcCodec)
    assert codec_for(LRC622) is codec_for(parse_policy("LRC-6-2-2-1024k"))   # the cell size is not the code
    assert type(codec_for(RS63)).__name__ == "Codec" and type(codec_for(REP3)).__name__ == "CopyCodec"


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_pattern_of_up_to_4_lost_units_decodes_exactly_or_is_refused(backend):
    codec = codec_for(LRC622, backend)
    length = 61
    units = all_units(LRC622, length, backend=backend)
    decodable = {}
    for lost_count in range(1, 5):
        ok = 0
        for lost in itertools.combinations(range(LRC622.units), lost_count):
            have = {i: units[i] for i in range(LRC622.units) if i not in lost}
            if undecodable_by_shape(6, 2, 2, lost):
                with pytest.raises(Undecodable, match=r"^LRC-6-2-2: cannot rebuild units \[\d"):
                    codec.decode(have, list(lost), length)
                assert not LRC622.decodable(have)
                continue
            out = codec.decode(have, list(lost), length)
            assert all(out[i].tobytes() == units[i].tobytes() for i in lost), lost
            assert LRC622.decodable(have)
            ok += 1
        decodable[lost_count] = ok
    assert decodable == {1: 10, 2: 45, 3: 120, 4: 180}   # 180 / 210 = 85.7 % of 4-loss patterns


@pytest.mark.parametrize("name, counts", [
    ("LRC-12-2-2-1024k", {3: (560, 560), 4: (1568, 1820)}),
    ("LRC-12-4-2-1024k", {3: (816, 816), 4: (3000, 3060)}),
    ("LRC-6-3-3-1024k", {4: (495, 495)}),
    ("LRC-6-2-1-1024k", {2: (36, 36), 3: (64, 84)}),
])
def test_other_shapes_decode_every_g_plus_1_losses_and_all_that_any_code_could(name, counts):
    policy = parse_policy(name)
    k, l, g, n = policy.k, policy.local_groups, policy.global_parities, policy.units
    for lost_count, (want_ok, total) in counts.items():
        ok = 0
        for lost in itertools.combinations(range(n), lost_count):
            good = policy.decodable(set(range(n)) - set(lost))
            assert good == (not undecodable_by_shape(k, l, g, lost)), lost   # maximally recoverable
            ok += good
        assert (ok, len(list(itertools.combinations(range(n), lost_count)))) == (want_ok, total)
    assert policy.tolerance == g + 1 and counts.get(g + 1, (1, 1))[0] == counts.get(g + 1, (1, 1))[1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_lost_unit_is_rebuilt_from_its_3_group_peers(backend):
    codec = codec_for(LRC622, backend)
    units = all_units(LRC622, 300, backend=backend)
    for lost in range(8):   # data and local parities
        group = lrc.group_of(6, 2, lost)
        peers = [u for u in lrc.group_members(6, 2, group) if u != lost]
        out = codec.decode({u: units[u] for u in peers}, [lost], 300)
        assert out[lost].tobytes() == units[lost].tobytes()
        assert sources.plan(LRC622, [lost], set(range(10)) - {lost}).read == tuple(peers)
    with pytest.raises(Undecodable):   # a global parity needs all the data
        codec.decode({u: units[u] for u in (0, 1, 2, 6)}, [8], 300)
    out = codec.decode({u: units[u] for u in range(6)}, [8, 9], 300)
    assert [out[8].tobytes(), out[9].tobytes()] == [units[8].tobytes(), units[9].tobytes()]


@pytest.mark.parametrize("backend", BACKENDS)
def test_short_cells_and_sub_ranges_decode_as_zero_padded_columns(backend):
    codec = codec_for(LRC622, backend)
    cells = random_cells(6, 100)
    cells[3], cells[4], cells[5] = cells[3][:40], cells[4][:0], cells[5][:0]   # a short last stripe
    units = cells + codec.encode(cells)
    padded = [np.concatenate([c, np.zeros(100 - len(c), np.uint8)]) for c in units]
    have = {u: units[u] for u in (0, 1, 2, 4, 5, 7, 9)}   # lost 3, 6, 8: group 1 local, then global
    out = codec.decode(have, [3, 6, 8], 100)
    assert [out[u].tobytes() for u in (3, 6, 8)] == [padded[u].tobytes() for u in (3, 6, 8)]
    sub = codec.decode({u: padded[u][10:50] for u in (1, 2, 6)}, [0], 40)
    assert sub[0].tobytes() == padded[0][10:50].tobytes()


def test_wanted_units_that_are_given_come_back_as_they_are():
    units = all_units(LRC622, 20)
    out = codec_for(LRC622).decode({u: units[u] for u in (0, 1, 2, 6)}, [1, 0], 20)
    assert list(out) == [1, 0] and out[1].tobytes() == units[1].tobytes() == units[1].tobytes()
    assert out[0].tobytes() == units[0].tobytes()


# --- the planner ------------------------------------------------------------------------------


def test_rs_plans_any_k_data_first_and_replicate_any_one():
    everyone = set(range(9))
    assert sources.plan(RS63, [2], everyone).read == (2,)
    p = sources.plan(RS63, [2], everyone - {2})
    assert (p.read, p.rebuild, p.cost, p.extra, p.local) == ((0, 1, 3, 4, 5, 6), (2,), 6, 5, False)
    assert sources.plan(RS63, [2], everyone - {2}, reading=[8, 7]).read == (0, 1, 3, 4, 7, 8)
    assert sources.plan(RS63, [2], everyone - {2}, reading=[8, 7]).cost == 4
    assert sources.plan(REP3, [0], {1, 2}).read == (1,)
    assert sources.plan(REP3, [0], {1, 2}, reading=[2]).read == (2,)
    with pytest.raises(Undecodable, match=r"^RS-6-3: cannot rebuild units \[2\] from units \[0, 1, 3, 4, 5\]"):
        sources.plan(RS63, [2], {0, 1, 3, 4, 5})
    with pytest.raises(ValueError, match="out of range"):
        sources.plan(RS63, [9], everyone)


def test_order_breaks_ties_between_equal_units():
    p = sources.plan(RS63, [0], set(range(1, 9)), order=[8, 7, 6, 5, 4, 3, 2, 1])
    assert p.read == (1, 2, 3, 4, 5, 8)   # data before parity still; then the caller's order
    p = sources.plan(RS63, [0, 1, 2], set(range(3, 9)))
    assert p.read == (3, 4, 5, 6, 7, 8)


def test_lrc_reads_the_group_first_and_goes_global_only_when_it_must():
    everyone = set(range(10))
    p = sources.plan(LRC622, [4], everyone - {4})
    assert (p.read, p.cost, p.extra, p.local) == ((3, 5, 7), 3, 2, True)
    p = sources.plan(LRC622, [4], everyone - {4, 7})   # its local parity is lost too
    assert p.cost == 6 and not p.local and p.rebuild == (4,)
    assert lrc.covers(6, 2, 2, p.read, [4])
    p = sources.plan(LRC622, [0, 3], everyone - {0, 3})   # one from each group, both local
    assert (p.read, p.local) == ((1, 2, 4, 5, 6, 7), True)
    with pytest.raises(Undecodable):
        sources.plan(LRC622, [0], {3, 4, 5, 7, 8, 9})


def test_a_parity_unit_replaces_a_slow_data_unit_of_a_whole_stripe_at_no_extra_read():
    stripe = range(6)
    assert sources.replacement(LRC622, stripe, 0, range(10)) == 6   # group 0's local parity
    assert sources.replacement(LRC622, stripe, 4, range(10)) == 7
    assert sources.replacement(LRC622, stripe, 4, set(range(10)) - {7}) == 8   # a global parity will do
    assert sources.replacement(RS63, stripe, 2, range(9)) == 6
    assert sources.replacement(REP3, [0], 0, range(3)) == 1
    assert sources.replacement(LRC622, [0], 0, range(10)) is None    # a one-cell read pays 2 more
    assert sources.replacement(RS63, [0, 1], 0, range(9)) is None
    assert sources.replacement(LRC622, [0, 1, 2], 0, range(10)) == 6  # the group's own cells
    assert sources.replacement(LRC622, stripe, 0, {1, 2, 3, 4, 5}) is None   # nothing left to use


def _exact_cost(policy, wants, avail, free):
    """The fewest units to read beyond ``free``, by trying every set: units already being read
    cost nothing and never hurt, so take them all and try the others by increasing count."""
    base = {w for w in wants if w in avail}
    missing = [w for w in wants if w not in avail]
    paid = {u for u in base if u not in free}
    if not missing:
        return len(paid)
    have = base | (set(free) & set(avail))
    others = sorted(set(avail) - have)
    for size in range(len(others) + 1):
        for extra in itertools.combinations(others, size):
            if lrc.covers(policy.k, policy.local_groups, policy.global_parities, have | set(extra), missing):
                return len(paid) + size
    return None


def test_lrc_plans_are_as_cheap_as_exhaustive_search():
    """Every wanted set a reader or repair asks for (one unit, two, a whole stripe's data) against
    every availability of up to 3 lost units, with nothing or some units already being read."""
    wanted_sets = [(w,) for w in range(10)] + [(0, 1), (0, 3), (2, 8), tuple(range(6))]
    checked = 0
    for wants in wanted_sets:
        for lost_count in range(4):
            for lost in itertools.combinations(range(10), lost_count):
                avail = frozenset(range(10)) - set(lost)
                for free in (frozenset(), frozenset({0, 1, 2, 8}) & avail):
                    best = _exact_cost(LRC622, wants, avail, free)
                    try:
                        cost = sources.plan(LRC622, wants, avail, free).cost
                    except Undecodable:
                        cost = None
                    assert cost == best, (wants, lost, sorted(free))
                    checked += 1
    assert checked == 14 * 176 * 2


def test_repair_traffic_is_3_units_per_lost_group_unit_and_6_per_global_or_rs_unit():
    full = 2 * LRC622.stripe_data_size   # two full stripes: every unit 2 cells
    cell = LRC622.cell_size
    assert [sources.repair_traffic(LRC622, full, i) // (2 * cell) for i in range(10)] == [3] * 8 + [6, 6]
    assert [sources.repair_traffic(RS63, full, i) // (2 * cell) for i in range(9)] == [6] * 9
    short = cell + 100   # unit 0 holds a cell, unit 1 100 bytes, the rest nothing; parity one cell
    assert sources.repair_traffic(LRC622, short, 1) == 100 + 100 + 0   # unit 0's and L0's first 100
    assert sources.repair_traffic(LRC622, short, 3) == 0                 # an empty unit reads nothing
    assert sources.repair_traffic(LRC622, short, 7) == 0   # L1 of an empty group: zeros, nothing to read
    assert sources.repair_traffic(LRC622, short, 8) == cell + 100        # a global parity: the data there is
