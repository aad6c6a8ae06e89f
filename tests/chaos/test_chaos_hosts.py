"""Chaos with --hosts (chaos/hosts.py): whole hosts killed, racks partitioned and slowed as a whole,
on DataNodes in network namespaces; every stored file reads back identical after every step.

The schedule's rules hold without root; the run needs root, `ip` and `iptables` (skipped otherwise).
"""

import os
import shutil

import pytest

from hedgefs.chaos.schedule import Topology
from hedgefs.chaos.runner import run_chaos
from hedgefs.chaos.schedule import HOST_ACTIONS, LOSS_FAULTS, POLICY, ChaosConfig, generate_schedule

from conftest import fork_server

# Seed 2's first 20 steps kill and start hosts, partition and heal a rack, slow a rack and clear it.
SEED, STEPS = 2, 20


def test_without_hosts_the_schedule_is_what_it_was():
    plain = generate_schedule(7, 120, 12)
    assert not {s.action for s in plain} & set(HOST_ACTIONS)
    assert all(not s.cut and not s.dns for s in plain)


@pytest.mark.parametrize("seed", range(1, 11))
def test_host_and_rack_steps_keep_the_loss_rules_and_spare_a_cut_rack(seed):
    topo = Topology(12, 12, 4)
    schedule = generate_schedule(seed, 300, 12, hosts=12, racks=4)
    assert {"host-kill", "host-start", "rack-partition", "rack-heal", "rack-slow", "rack-clear"} <= \
        {s.action for s in schedule}
    before = ()
    for step in schedule:
        lost = set(step.stopped) | set(step.frozen) | set(step.cut) | \
            {dn for dn, kind in step.faults if kind in LOSS_FAULTS}
        assert set(step.lost) == lost, step.line()
        assert step.beyond == (len(lost) > POLICY.m) and len(lost) <= POLICY.m + 2, step.line()
        if step.action == "rack-partition":
            assert set(step.cut) >= set(topo.rack_dns(step.target))
        if step.action in ("kill", "freeze", "thaw", "restart", "fault", "clear"):
            assert step.target not in before, f"{step.line()}: a DataNode step on a partitioned DataNode"
        before = step.cut
    assert generate_schedule(seed, 100, 12, hosts=12, racks=4) == schedule[:100]


def test_a_rack_is_a_run_of_hosts_and_a_host_has_its_dealt_datanodes():
    topo = Topology(12, 12, 4)
    assert topo.rack_dns("rack2") == ["dn4", "dn5", "dn6"]
    assert Topology(24, 12, 4).host_dns("host3") == ["dn3", "dn15"]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("iptables"),
                    reason="hosts in network namespaces need root, `ip` and `iptables`")
def test_a_short_run_with_host_and_rack_faults_passes(tmp_path):
    schedule = generate_schedule(SEED, STEPS, 12, hosts=12, racks=4)
    assert set(HOST_ACTIONS) <= {s.action for s in schedule}
    lines: list[str] = []
    config = ChaosConfig(seed=SEED, steps=STEPS, datanodes=12, hosts=12, racks=4)
    report = run_chaos(config, root=str(tmp_path / "chaos"), out=lines.append, spawn=fork_server().spawn)
    log = "\n".join(line for line in lines if not line.startswith("step "))
    assert report.wrong_bytes == 0, log
    assert report.ok, log
    assert report.steps == STEPS and report.files > 0 and report.reads > 0, log
    assert "on 12 hosts in 4 racks" in log
