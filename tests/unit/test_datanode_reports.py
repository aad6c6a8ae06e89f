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
