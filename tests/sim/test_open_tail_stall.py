"""The open tail's stall rule (client/open_tail.py, review-final F3) on a virtual clock: scripted
replicas answer an APPEND after a set delay (read_sim.VirtualLoop: no wall time). The allowance
is the striped writer's ``keep``: set once KEEP (2) replicas have answered (the first of a tail
of two), from their time, never from the first (fastest) answer alone of more; with fewer
answers, WRITE_TIMEOUT_S."""

import asyncio

import pytest
from read_sim import run

from hedgefs.client.open_tail import KEEP, OpenTail, TailBroken
from hedgefs.client.writer import FINISH_STALL_FLOOR_S, STALL_FACTOR, WRITE_TIMEOUT_S
from hedgefs.proto import hedgefs_pb2 as pb


def append_with(delays: list[float | None]) -> tuple[float, str]:
    """One 4 KiB append to a tail of len(delays) replicas, replica i answering after delays[i]
    virtual seconds (None: never). Returns (when it ended, "ok" or the TailBroken message)."""
    group = pb.BlockGroup(id=7, units=[pb.UnitLocation(index=i, datanode_id=f"dn{i}") for i in range(len(delays))])
    tail = OpenTail(None, group, 0, 1 << 20)

    async def one(unit, piece):
        delay = delays[unit.index]
        await asyncio.sleep(delay if delay is not None else 10 * WRITE_TIMEOUT_S)
        return tail.length + len(piece)
    tail._one = one

    async def go():
        loop = asyncio.get_running_loop()
        began = loop.time()
        try:
            await tail.append(b"x" * 4096)
            return loop.time() - began, "ok"
        except TailBroken as err:
            return loop.time() - began, str(err)
    return run(go)


def test_one_fast_replica_does_not_set_the_others_allowance():
    """A replica on a quiet disk (10 ms) and two at 0.5 s: the last, at 1.5 s, is within the
    allowance the three set (8 x 0.5 s), not cut at the floor the fastest alone would give (1 s)."""
    assert STALL_FACTOR * 0.5 > 1.5 > max(FINISH_STALL_FLOOR_S, STALL_FACTOR * 0.01)
    took, outcome = append_with([0.01, 0.5, 0.5, 1.5])
    assert outcome == "ok" and took == pytest.approx(1.5)


def test_the_last_replica_past_its_allowance_breaks_the_tail():
    took, outcome = append_with([0.01, 0.5, 0.5, None])
    assert took == pytest.approx(max(FINISH_STALL_FLOOR_S, STALL_FACTOR * 0.5))
    assert "7/3 on dn3: no answer in" in outcome and "while others took theirs" in outcome


def test_two_silent_replicas_of_four_break_the_tail_within_the_allowance_of_the_two_that_answered():
    """review-tailgo R2: two DataNodes frozen among the four: the allowance starts at the second
    answer (KEEP), ~1 s on quick disks, not the 20 s cap."""
    assert KEEP == 2
    took, outcome = append_with([0.01, 0.02, None, None])
    assert took == pytest.approx(max(FINISH_STALL_FLOOR_S, STALL_FACTOR * 0.02)) and took < WRITE_TIMEOUT_S / 10
    assert "7/2 on dn2: no answer in" in outcome and "while others took theirs" in outcome
    took, outcome = append_with([0.01, 0.5, None, None])   # the second answer's time, never the first's
    assert took == pytest.approx(STALL_FACTOR * 0.5)


def test_a_tail_of_two_cuts_the_second_at_the_firsts_allowance():
    """A tail close went on with two replicas: the first answer starts the allowance."""
    took, outcome = append_with([0.01, None])
    assert took == pytest.approx(FINISH_STALL_FLOOR_S) and "7/1 on dn1" in outcome


def test_with_one_answer_of_four_only_the_write_timeout_ends_the_append():
    took, outcome = append_with([0.01, None, None, None])
    assert took == pytest.approx(WRITE_TIMEOUT_S) and "7/1 on dn1" in outcome
