"""Prometheus metrics and the health probe, from a real NameNode core over real HTTP."""

import urllib.error
import urllib.request

import pytest

from hedgefs.namenode.http import MetricsServer
from nn_support import FakeClock, add_datanodes, make_namenode, write_file


@pytest.fixture
def served(tmp_path):
    clock = FakeClock()
    nn = make_namenode(tmp_path / "nn", clock)
    add_datanodes(nn, 6)
    write_file(nn, "/f", 10)
    server = MetricsServer(nn, "127.0.0.1", 0)
    port = server.start()
    yield nn, clock, f"http://127.0.0.1:{port}"
    server.stop()
    nn.close()


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        return response.read().decode()


def test_metrics_show_datanodes_and_group_health(served):
    nn, clock, base = served
    text = get(base + "/metrics")
    assert 'hedgefs_datanodes{state="live"} 6' in text
    assert 'hedgefs_block_groups{state="healthy"} 1' in text
    assert "hedgefs_files 1" in text
    assert "# TYPE hedgefs_repairs_done_total counter" in text
    clock.advance(1000)  # every DataNode silent: dead, the group unreadable
    nn.tick()
    text = get(base + "/metrics")
    assert 'hedgefs_datanodes{state="dead"} 6' in text
    assert 'hedgefs_block_groups{state="missing"} 1' in text
    assert 'hedgefs_datanode_up{datanode="dn1"} 0' in text


def test_health_and_unknown_paths(served):
    _, _, base = served
    assert get(base + "/health") == "ok\n"
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(base + "/nope", timeout=10)
    assert err.value.code == 404
