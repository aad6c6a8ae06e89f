"""`hedgefs chaos --ha` (chaos/ha.py, chaos/namespace.py): NameNode and etcd faults in the seeded
schedule, and the two invariants beside "every stored byte reads back": every acknowledged put and
delete is reflected at the end, and no two NameNodes were active at once.

The short run is real: 3 etcd members, 2 NameNodes, 9 DataNodes, writers and readers. The long
run is `hedgefs chaos --ha --seed 19 --steps 60` (bench/results/2026-12-01-chaos-ha-seed19.md).
"""

import shutil
import subprocess
import sys

import pytest

from hedgefs.chaos.ha import Claim, check_roles
from hedgefs.chaos.runner import HA_KEYS, SUMMARY_KEYS, run_chaos
from hedgefs.chaos.schedule import HA_ACTIONS, POLICY, ChaosConfig, generate_schedule

from etcd_support import SKIP_REASON

from conftest import fork_server

# Seed SHORT_SEED's first SHORT_STEPS steps kill -9 the active NameNode and start it again, freeze
# the active past its lease, freeze an etcd member and thaw it, and kill one, among DataNode faults
# (checked below, so a schedule change shows).
SHORT_SEED, SHORT_STEPS = 33, 16


def test_ha_schedule_adds_namenode_and_etcd_steps_and_keeps_one_namenode_and_a_quorum():
    for seed in range(1, 21):
        schedule = generate_schedule(seed, 200, 12, ha=True)
        assert schedule == generate_schedule(seed, 200, 12, ha=True)[:200]
        assert generate_schedule(seed, 50, 12, ha=True) == schedule[:50]
        down, etcd, frozen = False, "", ""
        for step in schedule:
            assert step.action != "nn-restart", step.line()   # the single NameNode's step: not with --ha
            if step.action in ("nn-kill", "nn-freeze"):
                assert not down, step.line()                  # the other NameNode is up to take over
            if step.action in ("etcd-kill", "etcd-freeze"):
                assert not etcd, step.line()                  # two of three members stay up
            if step.action in ("etcd-start", "etcd-thaw"):    # a frozen member is thawed, a killed one started
                assert step.target == etcd and (step.action == "etcd-thaw") == (frozen == etcd), step.line()
            down = {"nn-kill": True, "nn-start": False}.get(step.action, down)
            frozen = {"etcd-freeze": step.target, "etcd-kill": ""}.get(step.action, frozen)
            etcd = {"etcd-kill": step.target, "etcd-freeze": step.target, "etcd-start": "", "etcd-thaw": ""}.get(
                step.action, etcd)
            assert (step.nn_down, step.etcd_down) == (down, etcd), step.line()
        assert set(HA_ACTIONS) <= {s.action for s in schedule}
    assert not any(s.action in HA_ACTIONS for s in generate_schedule(7, 200, 12))


def test_short_ha_schedule_kills_the_active_and_freezes_and_kills_an_etcd_member():
    actions = [s.action for s in generate_schedule(SHORT_SEED, SHORT_STEPS, 9, ha=True)]
    assert {"nn-kill", "nn-start", "nn-freeze", "etcd-freeze", "etcd-thaw", "etcd-kill"} <= set(actions), actions


def _claim(name, epoch, sent, received, role="active"):
    return Claim(name, 1, role, epoch, 0, sent, received, 1)


def test_role_history_check_finds_two_actives():
    fine = [_claim("namenode", 5, 0, 1), _claim("namenode-2", 0, 0, 1, "standby"),
            _claim("namenode-2", 9, 5, 6), _claim("namenode", 0, 5, 6, "standby")]
    assert check_roles(fine) == []
    # namenode's answer was asked for before namenode-2's (epoch 9) came back: not a proof of two actives
    assert check_roles(fine + [_claim("namenode", 5, 5.5, 6.5)]) == []
    assert len(check_roles([_claim("namenode", 5, 0, 1), _claim("namenode-2", 5, 2, 3)])) == 1
    late = check_roles(fine + [_claim("namenode", 5, 7, 8)])
    assert late and "after epoch 9 was active" in late[0]


@pytest.mark.skipif(shutil.which("etcd") is None, reason=SKIP_REASON)
def test_short_ha_chaos_run_loses_nothing_and_never_has_two_actives(tmp_path):
    lines: list[str] = []
    config = ChaosConfig(seed=SHORT_SEED, steps=SHORT_STEPS, datanodes=9, writers=2, readers=1, files_per_writer=4,
                         max_file_bytes=POLICY.stripe_data_size + 1, ha=True)
    report = run_chaos(config, root=str(tmp_path / "chaos"), out=lines.append, spawn=fork_server().spawn)
    log = "\n".join(line for line in lines if not line.startswith("step "))
    assert report.wrong_bytes == 0, log
    assert report.ns_lost == 0 and report.dual_active == 0, log
    assert report.ok, log
    assert report.steps == SHORT_STEPS
    assert report.failovers >= 2 and report.epochs >= 3, log     # a kill and a freeze: two new actives
    assert report.ns_acknowledged > 0 and report.files > 0 and report.bytes_verified > 0, log
    assert set(report.summary()) == set(SUMMARY_KEYS + HA_KEYS)


def test_dry_run_with_ha_prints_the_ha_schedule():
    run = subprocess.run([sys.executable, "-m", "hedgefs", "chaos", "--ha", "--seed", str(SHORT_SEED), "--steps",
                          str(SHORT_STEPS), "--datanodes", "9", "--dry-run"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [f"chaos: seed {SHORT_SEED}"] + [
        s.line() for s in generate_schedule(SHORT_SEED, SHORT_STEPS, 9, ha=True)]
    assert "nn-kill active" in run.stdout and "ha: namenode down" in run.stdout
