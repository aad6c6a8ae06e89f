"""The launcher's process control: a NameNode it restarts keeps its RPC port, and its HTTP port
too unless another process took it meanwhile (then it starts on a free one and says so: a chaos
run's NameNode failed to restart, "cannot serve HTTP ... Address already in use"); a freeze
returns once the process is stopped."""

import contextlib
import pathlib
import socket

from conftest import run_cli, start_cluster, wait_until
from durability_support import report_cli


@contextlib.contextmanager
def squatting(port: int, what: str):
    """Another process's listener on ``port`` (once the killed process has let go of it)."""
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # past the old connections' TIME_WAIT

        def took() -> bool:
            try:
                squatter.bind(("127.0.0.1", port))
                return True
            except OSError:
                return False

        wait_until(took, 30, f"{what} to be free")
        squatter.listen()
        yield


def test_a_namenode_whose_http_port_was_taken_restarts_on_a_free_one(tmp_path):
    cluster = start_cluster(tmp_path / "c", datanodes=3)
    try:
        rpc, http = cluster.state["namenode"]["port"], cluster.state["namenode"]["http_port"]
        cluster.kill("namenode")
        with squatting(http, "the killed NameNode's HTTP port"):
            cluster.start("namenode")
        assert cluster.state["namenode"]["port"] == rpc
        assert cluster.state["namenode"]["http_port"] not in (0, http)
        log = (cluster.root / "logs" / "namenode.log").read_text()
        assert f"namenode's HTTP port {http} is taken: starting it on a free one" in log
        assert run_cli("ls", "/", namenode=cluster.namenode).code == 0
        # freeze returns only once every thread is stopped (kill() returns before that)
        cluster.freeze("dn1")
        tasks = list((pathlib.Path("/proc") / str(cluster.pid("dn1")) / "task").iterdir())
        assert len(tasks) > 1 and all((t / "stat").read_text().rsplit(")", 1)[1].split()[0] in "Tt" for t in tasks)
        cluster.thaw("dn1")
    finally:
        cluster.down()


def test_a_datanode_whose_rpc_port_was_taken_restarts_on_a_free_one_and_registers_it(tmp_path):
    """A DataNode's RPC port may be some client's by the time it restarts (test_lrc's dn8 failed
    to start on one): it starts on a free one, says so, and the NameNode hears the new address."""
    cluster = start_cluster(tmp_path / "c", datanodes=3)
    try:
        rpc = cluster.state["datanodes"]["dn1"]["port"]
        cluster.kill("dn1")
        with squatting(rpc, "the killed DataNode's RPC port"):
            cluster.start("dn1")
        moved = cluster.state["datanodes"]["dn1"]["port"]
        assert moved not in (0, rpc)
        log = (cluster.root / "logs" / "dn1.log").read_text()
        assert f"dn1's RPC port {rpc} is taken: starting it on a free one" in log
        wait_until(lambda: report_cli(cluster.namenode)["dn1"]["address"] == f"127.0.0.1:{moved}", 30,
                   "the NameNode to hear dn1's new address")
    finally:
        cluster.down()
