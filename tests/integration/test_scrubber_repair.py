"""The scrubber on real processes: a flipped byte in a cold unit is found by re-reading and
repaired, and a corrupt unit of a group at k + 1 good units is kept until its repair lands."""

import re
from pathlib import Path

import pytest
from conftest import (
    GROUP,
    client,
    fetch,
    pattern,
    run_cli,
    start_cluster,
    wait_until,
)
from durability_support import (
    fsck,
    fsck_cli,
    holders,
    report,
    report_cli,
    unit_file,
)

from hedgefs.client.fs import FileSystem


@pytest.fixture(scope="module")
def scrubbed(tmp_path_factory, security):
    """A cluster whose DataNodes scrub every unit twice a second (not the shared one: its scrubbing
    would read every other test's data)."""
    c = start_cluster(tmp_path_factory.mktemp("scrubbed"), security, scrub_interval_s=0.5)
    yield c
    c.down()


def wait_heartbeats(fs: FileSystem, dn: str, n: int) -> None:
    """Wait until the NameNode has received ``n`` more heartbeats from ``dn`` (each resets its age)."""
    seen, last = 0, report(fs)[dn].last_heartbeat_age_ms

    def more():
        nonlocal seen, last
        age = report(fs)[dn].last_heartbeat_age_ms
        seen += age < last
        last = age
        return seen >= n
    wait_until(more, 20, f"{n} heartbeats from {dn}", interval=0.02)


def flip_byte(path: Path, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x20]))


@pytest.mark.insecure_only("the scrubber reads its own disk")
def test_flipped_byte_in_a_cold_unit_is_found_by_the_scrubber_and_repaired(scrubbed):
    nn, path = scrubbed.namenode, "/cold"
    with client(nn) as fs:
        data = pattern(GROUP - 5000, seed=88)
        fs.write_bytes(path, data)
        gid = fs.stat(path).groups[0].id
        before = holders(fs, path)
        (spare,) = set(scrubbed.datanode_ids) - set(before.values())
        scrubbed.freeze(spare)       # no repair until it thaws: DEGRADED stays observable
        index, bad_dn = 7, before[7]  # a parity unit: no read of the file ever touches it
        blk = unit_file(scrubbed, bad_dn, gid, index)
        flip_byte(blk, blk.stat().st_size - 3)
        doc = wait_until(lambda: (d := fsck_cli(nn))["status"] == "DEGRADED" and d, 20,
                         "the scrubber to find the flipped byte (fsck DEGRADED)")
        assert doc["problems"] == [{"path": path, "group": gid, "policy": "RS-6-3-64k", "live_units": 8,
                                    "corrupt_units": 1, "needed_units": 6, "total_units": 9, "status": "DEGRADED",
                                    "detail": ""}]
        # the DataNode's scrub figures ride its next heartbeat, which may come after its bad-unit report
        wait_until(lambda: report_cli(nn)[bad_dn]["scrub"]["bad_units"] >= 1, 20,
                   f"{bad_dn}'s scrub figures in the report (its next heartbeat)")
        port = scrubbed.state["datanodes"][bad_dn]["http_port"]
        metrics = fetch(scrubbed, port, "/metrics")
        assert re.search(rf'^hedgefs_datanode_scrub_bad_units_total{{datanode="{bad_dn}"}} [1-9]', metrics, re.M), metrics
        assert blk.exists()          # kept until its replacement lands
        scrubbed.thaw(spare)
        wait_until(lambda: fsck(fs).status == "HEALTHY", 30, "the repair onto the spare (fsck HEALTHY)",
                   detail=lambda: str(fsck(fs)))
        assert holders(fs, path)[index] == spare
        wait_until(lambda: not blk.exists(), 30, f"the corrupt copy deleted on {bad_dn}")
        assert run_cli("cat", path, namenode=nn).stdout == data
        fs.delete(path)


@pytest.mark.insecure_only("NameNode bookkeeping of corrupt units")
def test_corrupt_unit_at_k_plus_1_good_units_is_not_deleted_before_the_repair_lands(scrubbed):
    """Two DataNodes of a group dead (7 good units = k+1), then a third unit goes bad on disk. It
    used to be deleted at once (leaving exactly k); now it stays until the group is whole again."""
    nn, path = scrubbed.namenode, "/k-plus-1"
    with client(nn) as fs:
        data = pattern(GROUP - 7000, seed=99)
        fs.write_bytes(path, data)
        gid = fs.stat(path).groups[0].id
        before = holders(fs, path)
        (spare,) = set(scrubbed.datanode_ids) - set(before.values())
        scrubbed.freeze(spare)
        dead = [before[1], before[8]]
        for dn in dead:
            scrubbed.kill(dn)
        wait_until(lambda: len(holders(fs, path)) == 7, 20, "two DataNodes declared dead")
        index, bad_dn = 4, before[4]
        blk = unit_file(scrubbed, bad_dn, gid, index)
        flip_byte(blk, 100)
        wait_until(lambda: fsck(fs).problems and fsck(fs).problems[0].corrupt_units == 1, 20,
                   "the scrubber to report the bad unit", detail=lambda: str(fsck(fs)))
        problem = fsck(fs).problems[0]
        assert (problem.live_units, problem.status) == (6, "DEGRADED")      # exactly k good units left
        wait_heartbeats(fs, bad_dn, 3)   # any delete the NameNode meant to send it has been sent and run
        assert blk.exists()
        assert run_cli("cat", path, namenode=nn).stdout == data
        for dn in dead:
            scrubbed.start(dn)
        scrubbed.wait_live(dead)
        scrubbed.thaw(spare)

        def corrupt_copy_gone():     # whenever the corrupt copy is gone, the group is whole again
            if not blk.exists():
                return True
            assert fsck(fs).status != "HEALTHY" or holders(fs, path)[index] == spare
            return False

        wait_until(corrupt_copy_gone, 60, f"the corrupt copy of unit {gid}/{index} on {bad_dn} to be deleted")
        assert fsck(fs).status == "HEALTHY" and holders(fs, path)[index] == spare
        assert run_cli("cat", path, namenode=nn).stdout == data
        fs.delete(path)
