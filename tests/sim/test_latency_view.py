"""The latency model started from the cluster's view (client/cluster_view.py): what a new client
makes of the DataNodes' own read figures and heartbeat ages before it has read anything itself."""

import random

import pytest

from hedgefs.client.cluster_view import View, slow_by_view
from latency_support import PEERS, changes, clock, model, read, warm  # noqa: F401 (fixtures)

def views(**p50_ms):
    """Figures as the NameNode hands them out: dn -> View(100 reads, p50, 2 x p50 as p99)."""
    return {dn: View(100, ms / 1000, 2 * ms / 1000) for dn, ms in p50_ms.items()}


HEALTHY_VIEW = {f"dn{i}": 0.4 + 0.1 * i for i in range(1, 10)}   # 0.5 .. 1.3 ms


def test_a_datanode_the_cluster_saw_slow_is_read_around_before_the_first_read(model, changes):
    model.seed(views(**{**HEALTHY_VIEW, "dn3": 250.0}))   # dn3's reads were cancelled after 250 ms: frozen
    assert model.is_slow("dn3") and model.slow_datanodes() == {"dn3"}
    assert changes == [("dn3", "slow")]
    assert model.book_probe("dn3")    # and it is asked now and then, like any slow DataNode


def test_a_seeded_slow_datanode_recovers_on_its_first_fast_probe(model, clock, changes):
    warm(model, clock, ms=2.0, peers=PEERS[:5])
    model.seed(views(**{**HEALTHY_VIEW, "dn7": 600.0}))
    assert model.is_slow("dn7")
    ticket = model.book_probe("dn7")
    assert ticket
    read(model, clock, "dn7", 2.0)
    ticket.done()
    assert not model.is_slow("dn7") and changes == [("dn7", "slow"), ("dn7", "recovered")]


def test_the_clients_own_reads_outweigh_the_clusters_view(model, clock, changes):
    warm(model, clock, ms=2.0, peers=PEERS[:5])    # it read dn1..dn5 itself, all fast
    model.seed(views(**{**HEALTHY_VIEW, "dn2": 600.0}))
    assert not model.is_slow("dn2") and changes == []


@pytest.mark.parametrize("seed", range(5))
def test_a_contended_cluster_in_the_view_marks_nobody_slow(model, changes, seed):
    """Every DataNode a little slower at random (0.5 .. 8 ms medians on a shared host), or every
    one much slower (an overload): nobody is 4 x the median DataNode and over 10 ms."""
    rng = random.Random(seed)
    model.seed(views(**{dn: rng.uniform(0.5, 8.0) for dn in PEERS}))
    model.seed(views(**{dn: rng.uniform(40.0, 120.0) for dn in PEERS}))
    assert changes == []


def test_figures_of_few_reads_or_few_datanodes_say_nothing():
    few_reads = {**views(**HEALTHY_VIEW), "dn3": View(3, 0.5, 0.9)}
    assert slow_by_view(few_reads) == {}
    assert slow_by_view(views(dn1=1.0, dn2=500.0)) == {}
    assert set(slow_by_view(views(dn1=1.0, dn2=1.2, dn3=500.0))) == {"dn3"}
    assert slow_by_view(views(dn1=1.0, dn2=1.2, dn3=9.0)) == {}   # 9 x, but under the 10 ms floor


def test_a_datanode_the_namenode_has_not_heard_for_long_is_read_around(model, changes):
    """Frozen (its process stopped): no figures, only its silence; heartbeats every second."""
    ages = {f"dn{i}": View(unheard_s=0.1 * i) for i in range(1, 10)}   # 0.1 .. 0.9 s
    model.seed({**ages, "dn4": View(unheard_s=12.0)})
    assert model.slow_datanodes() == {"dn4"} and changes == [("dn4", "slow")]


def test_heartbeats_late_everywhere_or_briefly_mark_nobody():
    late_everywhere = {f"dn{i}": View(unheard_s=2.0 + 0.5 * i) for i in range(1, 10)}   # a loaded host
    assert slow_by_view(late_everywhere) == {}
    brief = {**{f"dn{i}": View(unheard_s=0.1 * i) for i in range(1, 10)}, "dn4": View(unheard_s=2.5)}
    assert slow_by_view(brief) == {}                                                     # under 3 s
    assert slow_by_view({"dn1": View(unheard_s=0.2), "dn2": View(unheard_s=30.0)}) == {}  # 2 DataNodes: nobody to compare
