"""The chaos suite (chaos/): its schedule, and a short seeded run on a real cluster.

The run is the one that must catch a broken build: a codec that decodes the wrong unit, a reader
that puts a cell in the wrong place, a repair that stores the wrong bytes all show up as wrong
bytes within a few steps. The long run (200 steps) is `hedgefs chaos --seed 1 --steps 200`; its
report is committed under bench/results/.
"""

import subprocess
import sys

import pytest

from hedgefs.chaos.runner import SUMMARY_KEYS, run_chaos
from hedgefs.chaos.schedule import LOSS_FAULTS, POLICY, ChaosConfig, generate_schedule

from conftest import fork_server

# Seed 79's first 30 steps kill, freeze, thaw and restart DataNodes, set every fault kind (wire
# corruption and rot of units on disk included), restart the NameNode twice and go beyond tolerance
# once (checked below, so a schedule change shows).
SHORT_SEED, SHORT_STEPS = 79, 30
CHAOS_CLI = [sys.executable, "-m", "hedgefs", "chaos"]


def test_same_seed_same_schedule_and_a_longer_run_starts_with_it():
    long = generate_schedule(7, 120, 12)
    assert generate_schedule(7, 120, 12) == long
    assert generate_schedule(7, 40, 12) == long[:40]
    assert generate_schedule(8, 40, 12) != long[:40]


@pytest.mark.parametrize("seed", range(1, 21))
def test_losses_stay_within_m_unless_the_step_says_beyond_tolerance(seed):
    for step in generate_schedule(seed, 300, 12):
        lost = set(step.stopped) | set(step.frozen) | {dn for dn, kind in step.faults if kind in LOSS_FAULTS}
        assert set(step.lost) == lost
        assert step.beyond == (len(lost) > POLICY.m), step.line()
        assert len(lost) <= POLICY.m + 2, step.line()
        assert ("BEYOND TOLERANCE" in step.line()) == step.beyond


def test_short_schedule_covers_every_kind_of_fault():
    schedule = generate_schedule(SHORT_SEED, SHORT_STEPS, 12)
    assert {"kill", "freeze", "thaw", "restart", "fault", "clear", "nn-restart"} <= {s.action for s in schedule}
    assert {"delay", "bandwidth", "stall", "error", "corrupt", "wire", "rot"} <= {s.fault for s in schedule}
    assert sum(s.action == "nn-restart" for s in schedule) == 2 and sum(s.beyond for s in schedule) == 1
    assert any(s.beyond for s in schedule) and not all(s.beyond for s in schedule)


def test_dry_run_prints_the_seed_first_then_the_same_schedule_every_time():
    runs = [subprocess.run([*CHAOS_CLI, "--seed", "5", "--steps", "25", "--dry-run"], capture_output=True, text=True,
                           timeout=60) for _ in range(2)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    lines = runs[0].stdout.splitlines()
    assert lines[0] == "chaos: seed 5"
    assert lines[1:] == [s.line() for s in generate_schedule(5, 25, 12)]
    assert runs[0].stdout == runs[1].stdout


def test_30_seeded_steps_of_chaos_keep_every_byte(tmp_path, security):
    lines: list[str] = []
    config = ChaosConfig(seed=SHORT_SEED, steps=SHORT_STEPS, datanodes=12, writers=2, readers=2,
                         files_per_writer=5, max_file_bytes=POLICY.k * 256 * 1024 + POLICY.stripe_data_size + 1,
                         secure=security == "secure")
    report = run_chaos(config, root=str(tmp_path / "chaos"), out=lines.append, spawn=fork_server().spawn)
    log = "\n".join(line for line in lines if not line.startswith("step "))
    assert report.wrong_bytes == 0, log
    assert report.ok, log
    assert report.steps == SHORT_STEPS
    assert report.files > 0 and report.bytes_verified > 0 and report.reads > 0, log
    assert report.units_rotted >= 1, log     # step 13 rots units on a disk; the end finds them replaced
    assert set(report.summary()) == set(SUMMARY_KEYS)
    assert lines[0] == f"chaos: seed {SHORT_SEED}"


# Seed 102's first 30 steps make several DataNodes slow, stalled, erroring and bandwidth-capped at
# once, so rebuilds overlap in one stripe while retired reads run on. It caught the reader before
# the range fetcher returning wrong bytes (a retired read's buffer given back while another
# rebuild decoded from it): that reader failed it at step 17, then at step 22, in two runs of two
# (buffers poisoned, as here).
OVERLAP_SEED, OVERLAP_STEPS = 102, 30


@pytest.mark.insecure_only("the read logic: seed 79 covers the secure channels")
def test_overlapping_rebuilds_schedule_keeps_every_byte(tmp_path, security):
    lines: list[str] = []
    config = ChaosConfig(seed=OVERLAP_SEED, steps=OVERLAP_STEPS, datanodes=12, writers=2, readers=2,
                         files_per_writer=5, max_file_bytes=POLICY.k * 256 * 1024 + POLICY.stripe_data_size + 1)
    report = run_chaos(config, root=str(tmp_path / "chaos"), out=lines.append, spawn=fork_server().spawn)
    log = "\n".join(line for line in lines if not line.startswith("step "))
    assert report.wrong_bytes == 0, log
    assert report.ok, log
    assert report.reads > 0 and report.bytes_verified > 0, log
