"""One DataNode per id: a second `hedgefs datanode --id dn1` on another data dir is refused while
the real dn1 is live, with one line on its stderr, and the real one's units stay in the block map."""

import subprocess
import sys

import pytest

from conftest import assert_one_line_error, cli_env, client, run_cli, start_cluster
from hedgefs.datanode.storage import BlockStore
from hedgefs.namenode.errors import AlreadyExists


def test_a_data_dir_gets_a_storage_id_at_first_start_and_keeps_it(tmp_path):
    store = BlockStore(tmp_path / "dn")
    first = store.storage_id
    assert first.startswith("DS-")
    store.record_cluster_id("CID-x")
    store.close()
    again = BlockStore(tmp_path / "dn")
    assert again.storage_id == first and again.cluster_id == "CID-x"
    again.close()


def test_namesystem_refuses_another_storage_under_a_live_id(nn, clock):
    nn.register("dn1", "127.0.0.1:1", "127.0.0.1:2", storage_id="DS-real")
    with pytest.raises(AlreadyExists, match="DataNode id dn1 is taken: a live DataNode at 127.0.0.1:1"):
        nn.register("dn1", "127.0.0.1:3", "127.0.0.1:4", storage_id="DS-impostor")
    assert nn.liveness.address("dn1") == "127.0.0.1:1"
    nn.register("dn1", "127.0.0.1:5", "127.0.0.1:6", storage_id="DS-real")   # a restart on a new port
    clock.advance(nn.liveness.dead_interval_s + 1)
    nn.register("dn1", "127.0.0.1:7", "127.0.0.1:8", storage_id="DS-new-disk")  # dead: a replaced disk may join
    assert nn.liveness.address("dn1") == "127.0.0.1:7"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    # Three DataNodes and a default policy needing nine, as `cluster up --datanodes 3` makes.
    cluster = start_cluster(tmp_path_factory.mktemp("identity"), policy="RS-6-3-64k", datanodes=3)
    yield cluster
    cluster.down()


def test_a_second_datanode_with_a_live_id_is_refused_and_the_data_stays(small, tmp_path):
    nn = small.namenode
    data = b"hello, the real one\n"
    with client(nn) as fs:
        for i in range(6):
            fs.write_bytes(f"/id{i}", data, overwrite=True, policy="REPLICATE-1")
        # The impostor takes the id of the DataNode holding /id0 (placement picks it, not the test).
        real = next(iter(fs.stat("/id0").groups[0].units.values())).datanode_id
        held = [f"/id{i}" for i in range(6)
                if any(u.datanode_id == real for g in fs.stat(f"/id{i}").groups for u in g.units.values())]
        report = fs.admin.report()
    before = {d.id: d.address for d in report.datanodes}
    impostor = subprocess.run(
        [sys.executable, "-m", "hedgefs", "datanode", "--id", real, "--port", "0", "--data-dir", str(tmp_path / "imp"),
         "--namenode", nn, "--heartbeat-interval-s", "0.3", "--no-fsync", "--http-port", "0"],
        capture_output=True, text=True, timeout=60, env=cli_env(nn))
    assert impostor.returncode != 0
    lines = [ln for ln in impostor.stderr.splitlines() if ln.strip() and "INFO" not in ln]
    assert any(f"DataNode id {real} is taken" in ln and "own --id" in ln for ln in lines), impostor.stderr
    assert "Traceback" not in impostor.stderr
    with client(nn) as fs:
        report = {d.id: d for d in fs.admin.report().datanodes}
        assert report[real].address == before[real] and report[real].state != "dead"
        assert fs.admin.fsck("/").status == "HEALTHY"
        for path in held:
            assert fs.read_bytes(path) == data
    log = (small.root / "logs" / "namenode.log").read_text()
    assert f"refused a second DataNode {real}" in log and f"{real} now at" not in log


def test_distcp_policy_covers_its_own_staging_files(small, tmp_path):
    local = tmp_path / "hello.txt"
    local.write_bytes(b"hello\n")
    hint = run_cli("distcp", "--policy", "REPLICATE-1", str(local), "/h.txt", namenode=small.namenode)
    assert_one_line_error(hint, "no such file or directory", f"use file://{local}")
    result = run_cli("distcp", "--policy", "REPLICATE-1", f"file://{local}", "/h.txt", namenode=small.namenode)
    assert result.code == 0, result.stderr
    assert run_cli("cat", "/h.txt", namenode=small.namenode).stdout == b"hello\n"
    assert b".distcp-" not in run_cli("ls", "-R", "/", namenode=small.namenode).stdout


def test_an_insecure_cluster_dir_comes_up_secure_keeping_its_namespace(tmp_path):
    root = tmp_path / "upgrade"
    insecure = start_cluster(root, policy="REPLICATE-1", datanodes=2)
    try:
        with client(insecure.namenode) as fs:
            fs.write_bytes("/kept", b"from the insecure days")
    finally:
        insecure.down()
    secure = start_cluster(root, "secure", policy="REPLICATE-1", datanodes=2)   # was: "belongs to cluster CID-..."
    try:
        with client(secure.namenode) as fs:
            assert fs.read_bytes("/kept") == b"from the insecure days"
    finally:
        secure.down()


def test_a_restarted_datanode_keeps_its_http_port(small):
    before = small.state["datanodes"]["dn2"]["http_port"]
    assert before
    small.restart("dn2")
    assert small.state["datanodes"]["dn2"]["http_port"] == before   # a static Prometheus target still works
    small.wait_live(["dn2"])


def test_admin_report_brackets_a_dead_datanodes_last_heard_figures(small):
    from conftest import wait_until

    small.kill("dn3")
    try:
        wait_until(lambda: b" dead " in run_cli("admin", "report", namenode=small.namenode).stdout, 30, "dn3 dead")
        text = run_cli("admin", "report", namenode=small.namenode).stdout.decode()
        row = next(line for line in text.splitlines() if line.startswith("dn3 "))
        assert "(" in row and "dead" in row and "a dead DataNode's last heartbeat" in text
    finally:
        small.start("dn3")
        small.wait_live(["dn3"])


def test_report_says_stale_as_the_status_page_does(nn, clock):
    nn.register("dn1", "127.0.0.1:1", "127.0.0.1:2", storage_id="DS-1")
    nn.heartbeat("dn1", "127.0.0.1:1")
    assert nn.report().datanodes[0].state == "live"
    clock.advance(nn.liveness.dead_interval_s / 3 + 1)    # a heartbeat late, not yet dead
    assert nn.report().datanodes[0].state == "stale" == nn.status().datanodes[0].state
    clock.advance(nn.liveness.dead_interval_s)
    assert nn.report().datanodes[0].state == "dead"
