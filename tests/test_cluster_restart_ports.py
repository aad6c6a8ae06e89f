"""The launcher's process control: a process it restarts keeps its RPC port, and its HTTP port
too unless another process took it meanwhile (then it starts on a free one and says so: a chaos
run's NameNode failed to restart, "cannot serve HTTP ... Address already in use"); a freeze
returns once the process is stopped."""

import pathlib
import socket

from conftest import run_cli, start_cluster, wait_until


def test_a_namenode_whose_http_port_was_taken_restarts_on_a_free_one(tmp_path):
    cluster = start_cluster(tmp_path / "c", datanodes=3)
    try:
        rpc, http = cluster.state["namenode"]["port"], cluster.state["namenode"]["http_port"]
        cluster.kill("namenode")
        with socket.socket() as squatter:
            squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # past the old connections' TIME_WAIT

            def took() -> bool:   # once the killed process has let go of it
                try:
                    squatter.bind(("127.0.0.1", http))
                    return True
                except OSError:
                    return False

            wait_until(took, 30, "the killed NameNode's HTTP port to be free")
            squatter.listen()
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
