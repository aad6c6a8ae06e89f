"""Settling a batch Txn whose answer was lost (namenode/etcd_commit.py), against an in-process
stand-in for etcd's KV (revisions, the leader key's create revision, the ``commit`` marker's mod
revision, the two guards) whose answers the test loses, drops or delivers late.

What is checked: every batch lands exactly once, in order, whatever answer was lost; a late copy
of a first send never lands after its re-send; a newer epoch's batch makes the old active Fenced;
an etcd that never comes back fails the batch once the serve deadline passes.
"""

import pytest

from hedgefs.namenode.journal import etcd_commit
from hedgefs.namenode.journal.etcd_commit import Chain
from hedgefs.namenode.journal.etcd_meta import Fenced, MetaUnavailable


class FakeEtcd:
    """The part of EtcdMeta the chain uses. ``script``: what happens to each next Txn sent —
    "ok", "lost" (committed, answer lost), "dropped" (not committed), "held" (kept to deliver
    later with ``deliver``); ``down``: reads fail that many times."""

    def __init__(self, epoch: int = 5):
        self.revision = epoch
        self.leader_create = epoch
        self.kv: dict[str, tuple[bytes, int]] = {}
        self.script: list[str] = []
        self.down = 0
        self.held: list[tuple] = []
        self.txns = 0

    def _apply(self, epoch, puts, deletes, marker) -> int | None:
        _, mod = self.kv.get("commit", (None, 0))
        if self.leader_create != epoch or (marker is not None and mod != marker[1]):
            return None
        self.revision += 1
        for k, v in puts.items():
            self.kv[k] = (v, self.revision)
        for k in deletes:
            self.kv.pop(k, None)
        if marker is not None:
            self.kv["commit"] = (marker[0], self.revision)
        return self.revision

    def commit(self, epoch, puts, deletes, marker=None, timeout_s=None) -> int:
        self.txns += 1
        what = self.script.pop(0) if self.script else "ok"
        if what == "held":
            self.held.append((epoch, dict(puts), list(deletes), marker))
            raise MetaUnavailable("etcd 127.0.0.1:1: deadline_exceeded: held")
        if what == "dropped":
            raise MetaUnavailable("etcd 127.0.0.1:1: unavailable: Connection reset by peer")
        revision = self._apply(epoch, puts, deletes, marker)
        if what == "lost":
            raise MetaUnavailable("etcd 127.0.0.1:1: unavailable: Connection reset by peer")
        if revision is None:
            raise Fenced(f"epoch {epoch} is no longer the leader's")
        return revision

    def deliver(self) -> int | None:
        """The held first send reaches etcd now."""
        return self._apply(*self.held.pop(0))

    def marker(self, timeout_s=None):
        if self.down:
            self.down -= 1
            raise MetaUnavailable("etcd 127.0.0.1:2: deadline_exceeded: no leader")
        return self.kv.get("commit", (None, 0))

    def new_active(self, epoch: int) -> None:
        """Another NameNode wins (the leader key re-created) and commits its first batch."""
        self.leader_create = epoch
        self.revision = max(self.revision, epoch)
        assert self._apply(epoch, {"t/x/new": b"1"}, [], (f"{epoch}:1".encode(), self.kv.get("commit", (None, 0))[1]))


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr(etcd_commit.time, "sleep", lambda s: None)


def batches(etcd: FakeEtcd) -> dict[str, bytes]:
    return {k: v for k, (v, _) in etcd.kv.items() if k.startswith("t/")}


def test_a_batch_committed_but_its_answer_lost_is_settled_as_committed_and_not_sent_again():
    etcd = FakeEtcd()
    chain = Chain(etcd, 5, serving=lambda: True)
    first = chain.commit({"t/a/1": b"1"}, [])
    etcd.script = ["lost"]
    etcd.down = 2                      # etcd elects a new leader meanwhile
    revision = chain.commit({"t/a/2": b"2"}, [])
    assert revision == etcd.kv["commit"][1] == first + 1 and etcd.kv["commit"][0] == b"5:2"
    assert etcd.txns == 2 and chain.settled == 1
    assert chain.commit({"t/a/3": b"3"}, ["t/a/1"]) == revision + 1     # the chain goes on
    assert batches(etcd) == {"t/a/2": b"2", "t/a/3": b"3"}


def test_a_batch_that_never_landed_is_sent_again_and_lands_once():
    etcd = FakeEtcd()
    chain = Chain(etcd, 5, serving=lambda: True)
    chain.commit({"t/a/1": b"1"}, [])
    etcd.script = ["dropped", "dropped"]   # the first send and the first re-send lost with the member
    revision = chain.commit({"t/a/2": b"2"}, [])
    assert etcd.kv["commit"] == (b"5:2", revision) and etcd.txns == 4
    assert batches(etcd) == {"t/a/1": b"1", "t/a/2": b"2"} and etcd.revision == revision


def test_a_late_copy_of_the_first_send_never_lands_after_the_resend():
    etcd = FakeEtcd()
    chain = Chain(etcd, 5, serving=lambda: True)
    chain.commit({"t/a/1": b"1"}, [])
    etcd.script = ["held"]
    resent = chain.commit({"t/a/2": b"2"}, [])     # settled by a re-send
    after = chain.commit({"t/a/2": b"two"}, [])    # a later batch changes the same row
    assert etcd.deliver() is None                  # the first send arrives now: its guard fails
    assert etcd.kv["t/a/2"] == (b"two", after) and etcd.kv["commit"] == (b"5:3", after) and resent < after


def test_a_late_first_send_that_lands_before_the_resend_is_taken_as_committed():
    etcd = FakeEtcd()
    chain = Chain(etcd, 5, serving=lambda: True)
    chain.commit({"t/a/1": b"1"}, [])
    etcd.script = ["held"]
    real_marker = etcd.marker

    def marker_after_delivery(timeout_s=None):
        if etcd.held:
            etcd.deliver()            # the held copy lands while the chain reads
        return real_marker(timeout_s)
    etcd.marker = marker_after_delivery
    revision = chain.commit({"t/a/2": b"2"}, [])
    assert etcd.kv["commit"] == (b"5:2", revision) and etcd.txns == 2 and etcd.revision == revision


def test_a_resend_whose_first_copy_landed_meanwhile_fails_its_guard_and_is_taken_as_committed():
    etcd = FakeEtcd()
    chain = Chain(etcd, 5, serving=lambda: True)
    chain.commit({"t/a/1": b"1"}, [])
    etcd.script = ["held"]
    real_commit = etcd.commit

    def commit_after_delivery(*args, **kwargs):
        if etcd.held:
            etcd.deliver()            # the first copy lands just before the re-send
        return real_commit(*args, **kwargs)
    etcd.commit = commit_after_delivery
    revision = chain.commit({"t/a/2": b"2"}, [])
    assert etcd.kv["commit"] == (b"5:2", revision) and etcd.revision == revision


def test_a_newer_epoch_fences_the_settling_active():
    etcd = FakeEtcd()
    chain = Chain(etcd, 5, serving=lambda: True)
    chain.commit({"t/a/1": b"1"}, [])
    etcd.script = ["dropped"]
    etcd.down = 1
    real_marker = etcd.marker

    def deposed(timeout_s=None):
        if etcd.leader_create == 5:
            etcd.new_active(40)       # the lease ran out meanwhile: another NameNode committed
        return real_marker(timeout_s)
    etcd.marker = deposed
    with pytest.raises(Fenced, match="40:1"):
        chain.commit({"t/a/2": b"2"}, [])
    assert "t/a/2" not in etcd.kv


def test_a_newer_epoch_that_has_not_committed_yet_fences_the_resend():
    etcd = FakeEtcd()
    chain = Chain(etcd, 5, serving=lambda: True)
    chain.commit({"t/a/1": b"1"}, [])
    etcd.script = ["dropped"]
    etcd.leader_create = 40           # the leader key is another's; the marker still names 5:1
    with pytest.raises(Fenced):
        chain.commit({"t/a/2": b"2"}, [])
    assert etcd.kv["commit"][0] == b"5:1" and "t/a/2" not in etcd.kv


def test_an_etcd_that_does_not_come_back_before_the_serve_deadline_fails_the_batch():
    etcd = FakeEtcd()
    tries = []
    chain = Chain(etcd, 5, serving=lambda: len(tries) < 5)
    chain.commit({"t/a/1": b"1"}, [])
    etcd.script = ["dropped"]
    etcd.down = 10 ** 6
    real_marker = etcd.marker

    def counted(timeout_s=None):
        tries.append(timeout_s)
        return real_marker(timeout_s)
    etcd.marker = counted
    with pytest.raises(MetaUnavailable, match="serve deadline"):
        chain.commit({"t/a/2": b"2"}, [])
    assert len(tries) == 5 and all(t is not None and t <= 1 for t in tries)


def test_the_first_batch_of_an_epoch_chains_on_the_previous_actives_last():
    etcd = FakeEtcd(epoch=5)
    Chain(etcd, 5, serving=lambda: True).commit({"t/a/1": b"1"}, [])
    etcd.leader_create = etcd.revision = 40
    chain = Chain(etcd, 40, serving=lambda: True)
    revision = chain.commit({"t/a/2": b"2"}, [])
    assert etcd.kv["commit"] == (b"40:1", revision)
