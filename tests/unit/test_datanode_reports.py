"""The DataNode's incremental reports (receipts, bad units), without gRPC: bounded, retried, deduplicated."""

import threading

from conftest import wait_until
from hedgefs.datanode.reports import Reports


class FakeNameNode:
    def __init__(self):
        self.up = False
        self.stored, self.bad = [], []
        self.calls = 0
        self.block_reports_asked = 0
        self.lock = threading.Lock()

    def send_stored(self, units):
        with self.lock:
            self.calls += 1
            if not self.up:
                raise ConnectionError("down")
            self.stored += units

    def send_bad(self, units):
        with self.lock:
            if not self.up:
                raise ConnectionError("down")
            self.bad += units

    def want_block_report(self):
        self.block_reports_asked += 1


def test_reports_are_bounded_deduplicated_retried_and_a_full_report_covers_dropped_receipts():
    nn = FakeNameNode()
    r = Reports(send_stored=nn.send_stored, send_bad=nn.send_bad, has_unit=lambda g, i, gen: (g, i) != (9, 9),
                want_block_report=nn.want_block_report, limit=3, retry_s=0.01)
    for unit in [(1, 0), (1, 1), (1, 0), (1, 2), (9, 9)]:
        r.stored(*unit, 7, 100)
    for unit in [(2, 0), (2, 0), (2, 1), (2, 2), (2, 3)]:
        r.bad(*unit, 7, "bad")
    assert r.pending() == (3, 3)
    assert (r.dropped_receipts, nn.block_reports_asked) == (1, 1)   # (9, 9): a full report will cover it
    assert r.dropped_bad == 1
    r.covered([(1, 1, 7)])                  # a full block report listed it
    r.start()
    try:
        # the NameNode is down: retried, nothing lost
        wait_until(lambda: nn.calls >= 3, 10, "three sends to the NameNode that is down", interval=0.005)
        nn.up = True
        wait_until(lambda: r.pending() == (0, 0), 10, "no reports pending", interval=0.005)
        assert sorted(nn.stored) == [(1, 0, 7, 100), (1, 2, 7, 100)]
        assert sorted(nn.bad) == [(2, 0, 7, "bad"), (2, 1, 7, "bad"), (2, 2, 7, "bad")]
    finally:
        r.stop()


def test_receipts_stored_while_one_is_out_go_together_in_the_next_call():
    """A group commit's batching: one call in flight; the units stored meanwhile, one call after it."""
    nn = FakeNameNode()
    nn.up = True
    first_out, release = threading.Event(), threading.Event()
    sent = []

    def send_stored(units):
        sent.append(list(units))
        if len(sent) == 1:
            first_out.set()
            assert release.wait(10)

    r = Reports(send_stored=send_stored, send_bad=nn.send_bad, has_unit=lambda g, i, gen: True,
                want_block_report=nn.want_block_report)
    r.start()
    try:
        r.stored(1, 0, 7, 10)
        assert first_out.wait(10)
        for group in range(2, 12):   # ten puts' units stored while the first receipt is out
            r.stored(group, 0, 7, 10)
        release.set()
        wait_until(lambda: r.pending() == (0, 0) and sum(map(len, sent)) == 11, 10, "every receipt sent",
                   interval=0.005)
        assert [len(call) for call in sent] == [1, 10]
    finally:
        r.stop()


def test_a_unit_deleted_while_its_receipt_is_out_is_told_deleted_only_after_the_receipt():
    """The check-then-send race: the heartbeat that tells a delete (``telling``) waits for the
    receipt of the unit in flight on the same link, so the NameNode hears "stored" then "deleted",
    never the reverse (a location that is not there until the next full block report); the delete
    itself waits for nothing (it may have come from another NameNode's link: review-a M1); and a
    unit deleted before its receipt is checked is not announced at all."""
    here = {(1, 0, 7), (2, 0, 7)}
    events = []
    checked, told = threading.Event(), threading.Event()

    def has_unit(g, i, gen):
        checked.set()
        return (g, i, gen) in here

    def send_stored(units):
        told.wait(0.5)   # give a heartbeat that does not wait for this call the time to get in first
        events.append(("stored", sorted(u[:3] for u in units)))

    def heartbeat():
        with r.telling() as deleted:
            events.append(("told", deleted))
        told.set()

    r = Reports(send_stored=send_stored, send_bad=lambda units: None, has_unit=has_unit,
                want_block_report=lambda: None)
    r.start()
    try:
        r.stored(1, 0, 7, 10)
        assert checked.wait(10)
        here.discard((1, 0, 7))
        r.deleted(1, 0, 7)       # at once, while the receipt is out
        assert r.untold() == [(1, 0, 7)]
        beat = threading.Thread(target=heartbeat)
        beat.start()
        beat.join(10)
        assert events == [("stored", [(1, 0, 7)]), ("told", [(1, 0, 7)])]
        assert r.untold() == []

        here.discard((2, 0, 7))  # deleted before its receipt is checked: never announced
        r.deleted(2, 0, 7)
        r.stored(3, 0, 7, 10)    # (a unit that was never here either)
        wait_until(lambda: r.pending() == (0, 0), 10, "the queue drained", interval=0.005)
        assert [e for e in events if e[0] == "stored"] == [("stored", [(1, 0, 7)])]
    finally:
        r.stop()


def test_a_unit_stored_again_is_not_told_deleted_and_a_delete_noted_while_telling_is_kept():
    here = set()
    asked = []
    r = Reports(send_stored=lambda units: None, send_bad=lambda units: None,
                has_unit=lambda g, i, gen: (g, i, gen) in here, want_block_report=lambda: asked.append(1), limit=2)
    r.deleted(1, 0, 7)
    here.add((1, 0, 7))
    r.stored(1, 0, 7, 10)        # stored again since: the delete is no longer true
    here.add((3, 0, 7))
    r.deleted(3, 0, 7)           # stored again before the delete was noted: not noted
    r.deleted(2, 0, 7)
    assert r.untold() == [(2, 0, 7)]

    try:
        with r.telling() as deleted:   # the heartbeat failed: told next time
            assert deleted == [(2, 0, 7)]
            raise ConnectionError("down")
    except ConnectionError:
        pass
    assert r.untold() == [(2, 0, 7)]
    with r.telling() as deleted:
        r.deleted(2, 0, 7)           # deleted again (stored and deleted) while the heartbeat was out
        r.deleted(4, 0, 7)
    assert r.untold() == [(2, 0, 7), (4, 0, 7)]
    r.deleted(5, 0, 7)               # past the bound: a full report covers it
    assert r.untold() == [(2, 0, 7), (4, 0, 7)] and r.dropped_deletes == 1 and asked == [1]
