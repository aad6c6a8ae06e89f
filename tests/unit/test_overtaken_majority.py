"""The overtaken rule's majority (client/overtaking.py): a read is overtaken when at least 3 of its
later peers answered within half its age, and by 3 to 1 over those that had the time and did not.
A healthy host's tail read has a third or more of its peers late too: a bare majority took such
reads for stuck ones (tests/replay: RS-6-3 healthy hedged 3 reads, 4.25 % extra unit reads)."""

import pytest

from hedgefs.client.overtaking import OK, ReadLog

MS = 0.001


def log_with(fast: int, late: int, late_running: bool = True):
    """A read on dn0 sent at 0, then ``fast`` later peers (other DataNodes, its size) that answered
    in 2 ms and ``late`` that are still running (or took 15 ms); asked at 20 ms (half its age: 10 ms)."""
    log = ReadLog()
    read = log.started("dn0", 0, 0.0)
    for i in range(fast):
        peer = log.started(f"dn{i + 1}", 0, 1 * MS)
        ReadLog.ended(peer, 3 * MS, OK)
    for i in range(late):
        peer = log.started(f"dn{fast + i + 1}", 0, 2 * MS)
        if not late_running:
            ReadLog.ended(peer, 17 * MS, OK)
    return log, read


@pytest.mark.parametrize("fast, late, overtaken", [
    (3, 0, True),
    (2, 0, False),     # fewer than 3 could be luck
    (3, 1, True),      # 3 to 1
    (3, 2, False),     # a bare majority is not enough
    (5, 2, False),     # 5 < 3 x 2
    (6, 2, True),
])
@pytest.mark.parametrize("late_running", [True, False])
def test_a_read_is_overtaken_by_3_later_peers_and_3_to_1_over_the_late_ones(fast, late, overtaken, late_running):
    log, read = log_with(fast, late, late_running)
    assert log.overtaken(read, 20 * MS) is overtaken


def test_later_peers_too_young_to_have_answered_are_not_counted_either_way():
    """Peers sent less than half its age ago had no time to overtake it: 3 fast ones and 3 sent
    just now (still running) are 3 to 0."""
    log, read = log_with(3, 0)
    for i in range(3):
        log.started(f"dn{10 + i}", 0, 15 * MS)
    assert log.overtaken(read, 20 * MS)


def test_peers_on_its_own_datanode_do_not_count():
    log = ReadLog()
    read = log.started("dn0", 0, 0.0)
    for _ in range(4):
        ReadLog.ended(log.started("dn0", 0, 1 * MS), 2 * MS, OK)
    assert not log.overtaken(read, 20 * MS)
