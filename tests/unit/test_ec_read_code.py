"""A read's code (ec/sources.py ``code_for``): what a range fetch asks of the code's shape, pure.

RS-6-3: units 0-5 data, 6-8 parity. LRC-6-2-2: groups 0-2 | 6 and 3-5 | 7, global parities 8, 9.
REPLICATE-3: unit 0 wanted, units 0-2 its replicas. ``ranked`` stands for the policy's order of
the units not asked yet, best first.
"""

import pytest

from hedgefs.ec.policy import parse_policy
from hedgefs.ec.sources import Copies, LrcCode, MdsCode, code_for

RS = code_for(parse_policy("RS-6-3-64k"))
LRC = code_for(parse_policy("LRC-6-2-2-64k"))
REP = code_for(parse_policy("REPLICATE-3"))
STRIPE = [0, 1, 2, 3, 4, 5]


def never(unit: int) -> bool:
    return False


def test_each_policy_gets_its_own_code():
    assert (type(RS), type(LRC), type(REP)) == (MdsCode, LrcCode, Copies)
    assert code_for(parse_policy("RS-6-3-64k")) is RS   # one per policy


@pytest.mark.parametrize("code, wanted, named", [(RS, [2], [2]), (LRC, STRIPE, STRIPE), (REP, [0], [])])
def test_the_units_a_read_asks_by_name(code, wanted, named):
    """RS and LRC ask each wanted unit's own DataNode; a replica is picked by the ranking."""
    assert list(code.named(wanted)) == named


def test_covered_and_missing():
    assert RS.covered(STRIPE, {0, 1, 6}) == {0, 1} and RS.missing(STRIPE, {0, 1, 6}) == [2, 3, 4, 5]
    assert REP.covered([0], {2}) == {0} and REP.missing([0], {2}) == []   # any replica holds unit 0
    assert REP.covered([0], set()) == set() and REP.missing([0], set()) == [0]
    assert list(REP.holding([0])) == [0, 1, 2] and list(RS.holding([3])) == [3]


def test_rs_reads_any_k_in_the_callers_order():
    # A cell read of unit 2 whose read was replaced: k = 6 more from the ranking, one spare too.
    assert RS.to_read([2], set(), [8, 0, 1, 3, 4, 5, 6, 7], 1, never) == [8, 0, 1, 3, 4, 5, 6]
    # A stripe read, unit 3 late: five data units counted on, one parity and a spare.
    assert RS.to_read([3], {0, 1, 2, 4, 5}, [6, 7, 8], 1, never) == [6, 7]


def test_lrc_reads_the_local_group_and_no_spare_outside_it():
    assert sorted(LRC.to_read([4], set(), [0, 1, 2, 3, 5, 6, 7, 8, 9], 1, never)) == [3, 5, 7]


def test_lrc_goes_global_when_the_group_is_avoided():
    """Unit 5's DataNode is troubled: unit 4 is rebuilt globally, without it if it can be."""
    send = LRC.to_read([4], set(), [0, 1, 2, 3, 5, 6, 7, 8, 9], 0, lambda u: u == 5)
    assert 5 not in send and len(send) == 6


def test_lrc_with_nothing_decodable_sends_nothing():
    assert LRC.to_read([0, 1, 2], {3, 4, 5}, [7], 0, never) == []


def test_enough():
    assert RS.enough([2], {2}) and RS.enough([2], {0, 1, 3, 4, 5, 6}) and not RS.enough([2], {0, 1, 3, 4, 5})
    assert LRC.enough([4], {3, 5, 7}) and not LRC.enough([4], {3, 5, 6})
    assert REP.enough([0], {1}) and not REP.enough([0], set())


def test_holders_say_which_done_unit_holds_a_wanted_unit_as_it_is():
    assert RS.holders(STRIPE, {0: 1, 1: 1, 6: 1}) == {0: 0, 1: 1}
    assert REP.holders([0], {2: "done", 1: "done"}) == {0: 2}   # the first done replica
    assert REP.holders([0], {}) == {}


def test_spare_room_is_for_whole_stripes_and_other_replicas():
    assert RS.spare_room(STRIPE, available=9) == 3 and RS.spare_room([2], available=9) == 0
    assert RS.spare_room(STRIPE, available=6) == 0   # nothing beyond the k it needs
    assert REP.spare_room([0], available=3) == 2


def test_tiers_put_data_before_parity_and_replicas_alike():
    assert [RS.tier(u) for u in range(9)] == [0] * 6 + [1] * 3
    assert [REP.tier(u) for u in range(3)] == [0, 0, 0]


def test_a_hedge_reads_a_spare_except_for_replicas():
    assert (RS.hedge_spare, LRC.hedge_spare, REP.hedge_spare) == (1, 1, 0)


def test_shortfalls_say_what_was_missing():
    assert "only 5 of the 6 units needed" in RS.shortfall(7, 0, 5, 9, "")
    assert REP.shortfall(7, 0, 0, 3, "dn1: boom") == "block 7: none of its 3 live replicas could be read (dn1: boom)"
    assert REP.shortfall(7, 0, 0, 0, "") == "block 7 has no live replica"


def test_unit_ranges_of_copies_are_one_piece_of_unit_0_and_of_rs_the_layouts():
    from hedgefs.ec import layout

    (r,) = REP.unit_ranges(10_000_000, 1000, 5_000_000)
    assert (r.index, r.offset_in_block, r.length) == (0, 1000, 5_000_000)
    assert [(c.offset_in_block, c.offset_in_group, c.length) for c in r.cells] == [(1000, 1000, 5_000_000)]
    assert REP.unit_ranges(100, 100, 0) == []
    with pytest.raises(ValueError):
        REP.unit_ranges(100, 50, 51)
    assert RS.unit_ranges(6 * 65536, 1000, 200_000) == layout.group_range_to_units(RS.policy, 6 * 65536, 1000, 200_000)
