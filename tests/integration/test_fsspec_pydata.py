"""The tools people use, on hedgefs:// (hedgefs/fsspec): pandas parquet and CSV byte-exact,
pyarrow.dataset over a partitioned directory reading only the ranges it needs (counted at the
fsspec layer and on the DataNodes), dask read_parquet over a few partitions; each again with a
DataNode frozen part-way through the read: the same result, and the client's hedges counted.

"Part-way": the DataNode is frozen (SIGSTOP) as the read asks for its second range, so the read
starts healthy and meets the frozen DataNode in the middle.

One cluster for the module; pandas, pyarrow and dask are imported once, here.
"""

import contextlib
import re
import threading

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from conftest import fetch, start_cluster
from hedgefs.fsspec import HedgeFileSystem

ROWS = 60_000
COLUMNS = 20


@pytest.fixture(scope="module")
def pcluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("pydata-cluster"))
    yield c
    c.down()


@pytest.fixture(scope="module")
def hfs(pcluster):
    import fsspec

    fs = fsspec.filesystem("hedgefs", namenode=pcluster.namenode)
    yield fs
    fs.close()


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(26)
    data = {f"c{i}": rng.standard_normal(ROWS) for i in range(COLUMNS)}
    data["t"] = np.arange(ROWS, dtype=np.int64)
    data["k"] = np.repeat(np.arange(4, dtype=np.int64), ROWS // 4)
    data["name"] = [f"row-{i}" for i in range(ROWS)]
    return pd.DataFrame(data)


def url(cluster, path: str) -> str:
    return f"hedgefs://{cluster.namenode}{path}"


def busiest_datanode(fs, paths: list[str]) -> str:
    """The DataNode holding the most units of these files (the one a read is surest to meet)."""
    counts: dict[str, int] = {}
    for path in paths:
        for group in fs.client.stat(path).groups:
            for unit in group.units.values():
                counts[unit.datanode_id] = counts.get(unit.datanode_id, 0) + 1
    return max(sorted(counts), key=counts.get)


@contextlib.contextmanager
def frozen_part_way(cluster, fs, datanode: str):
    """Freeze ``datanode`` as the read in the block asks for its second range (before that range
    is sent: the fetch counter's listener runs in the reading thread); thaw it after."""
    start = fs.fetched.ranges
    froze = threading.Event()
    lock = threading.Lock()

    def listener(ranges: int, _bytes: int) -> None:
        with lock:
            if ranges - start >= 2 and not froze.is_set():
                cluster.freeze(datanode)
                froze.set()

    before = dict(fs.stats().counters)
    fs.fetched.listener = listener
    result = {}
    try:
        yield result
    finally:
        fs.fetched.listener = None
        if froze.is_set():
            cluster.thaw(datanode)
            cluster.wait_live([datanode], 60)
    assert froze.is_set(), "the read asked for one range only"
    counters = fs.stats().counters
    result.update({k: counters[k] - before.get(k, 0) for k in counters})
    # Reads went around the frozen DataNode: hedged, or read around once the model called it silent
    # (what a busy host's breaker allows: on two cores shared with other tests it may be open).
    assert result["hedges"] + result["avoided"] >= 1, f"no read went around the frozen DataNode: {result}"


def datanode_read_bytes(cluster) -> int:
    total = 0
    for name in cluster.datanode_ids:
        text = fetch(cluster, cluster.state["datanodes"][name]["http_port"], "/metrics")
        match = re.search(r"^hedgefs_datanode_read_bytes_total\{[^}]*\} (\S+)$", text, re.M)
        total += int(float(match.group(1))) if match else 0
    return total


# ---------------------------------------------------------------------------- pyarrow.dataset
# (first: nothing has been frozen yet, so no repair traffic is on the DataNodes' counters)

@pytest.fixture(scope="module")
def dataset_dir(hfs, frame) -> str:
    """/pa/ds: hive-partitioned by k (4 files), 16 row groups of 20 float columns, t, name each."""
    ds.write_dataset(pa.Table.from_pandas(frame, preserve_index=False), "/pa/ds", format="parquet",
                     partitioning=["k"], partitioning_flavor="hive", filesystem=hfs,
                     max_rows_per_group=ROWS // 64, min_rows_per_group=ROWS // 64, existing_data_behavior="error")
    return "/pa/ds"


def test_pyarrow_dataset_reads_only_the_ranges_it_needs(pcluster, frame, dataset_dir):
    fs = HedgeFileSystem(namenode=pcluster.namenode, hedge=False, skip_instance_cache=True)   # no extra reads
    try:
        files = fs.find(dataset_dir)
        assert len(files) == 4 and all(re.search(r"/k=\d/", f) for f in files)
        lo, hi = 5 * ROWS // 64 + ROWS // 2, 5 * ROWS // 64 + ROWS // 2 + 100   # rows of one row group, in k=2
        before = datanode_read_bytes(pcluster)
        table = ds.dataset(dataset_dir, filesystem=fs, format="parquet", partitioning="hive").to_table(
            columns=["c3", "c17"], filter=(ds.field("k") == 2) & (ds.field("t") >= lo) & (ds.field("t") < hi))
        moved = datanode_read_bytes(pcluster) - before
        expected = frame[(frame.k == 2) & (frame.t >= lo) & (frame.t < hi)][["c3", "c17"]].reset_index(drop=True)
        pd.testing.assert_frame_equal(table.to_pandas(), expected)
        partition = fs.info(next(f for f in files if "/k=2/" in f))["size"]
        print(f"selective read: {fs.fetched.ranges} ranges, {fs.fetched.bytes} B fetched, {fs.asked.bytes} B asked, "
              f"{moved} B sent by DataNodes, of a {partition} B file")
        assert fs.fetched.bytes <= 1.2 * fs.asked.bytes, (fs.fetched.bytes, fs.asked.bytes)
        assert fs.fetched.ranges <= 6, fs.fetched.ranges     # the footer and metadata, then the 2 column chunks
        # The DataNodes send whole 64 KiB checksum chunks (the client checks each CRC32C): a little more
        # than was fetched, and a small part of the file (2 columns of 1 row group of 16, and the footer).
        assert fs.fetched.bytes <= moved < partition / 4, (fs.fetched.bytes, moved, partition)
    finally:
        fs.close()


# ---------------------------------------------------------------------------- pandas

def test_pandas_parquet_byte_exact_and_through_a_frozen_datanode(pcluster, hfs, frame, tmp_path):
    local = tmp_path / "t.parquet"
    frame.to_parquet(local, row_group_size=ROWS // 16)
    frame.to_parquet(url(pcluster, "/pd/t.parquet"), row_group_size=ROWS // 16)
    assert hfs.cat("/pd/t.parquet") == local.read_bytes()
    pd.testing.assert_frame_equal(pd.read_parquet(url(pcluster, "/pd/t.parquet")), frame)
    with frozen_part_way(pcluster, hfs, busiest_datanode(hfs, ["/pd/t.parquet"])):
        again = pd.read_parquet(url(pcluster, "/pd/t.parquet"))
    pd.testing.assert_frame_equal(again, frame)


def test_pandas_csv_byte_exact_and_through_a_frozen_datanode(pcluster, hfs, frame, tmp_path):
    part = frame.iloc[: ROWS // 2]
    local = tmp_path / "t.csv"
    part.to_csv(local, index=False)
    part.to_csv(url(pcluster, "/pd/t.csv"), index=False)
    assert hfs.cat("/pd/t.csv") == local.read_bytes()
    expected = pd.read_csv(local)
    pd.testing.assert_frame_equal(pd.read_csv(url(pcluster, "/pd/t.csv")), expected)
    with frozen_part_way(pcluster, hfs, busiest_datanode(hfs, ["/pd/t.csv"])):
        again = pd.read_csv(url(pcluster, "/pd/t.csv"))
    pd.testing.assert_frame_equal(again, expected)


def test_pyarrow_dataset_through_a_frozen_datanode(pcluster, hfs, frame, dataset_dir):
    dataset = ds.dataset(dataset_dir, filesystem=hfs, format="parquet", partitioning="hive")
    want = (ds.field("k") >= 1) & (ds.field("c5") > 0.5)
    healthy = dataset.to_table(columns=["t", "c0", "c9", "name"], filter=want).sort_by("t")
    with frozen_part_way(pcluster, hfs, busiest_datanode(hfs, hfs.find(dataset_dir))):
        again = dataset.to_table(columns=["t", "c0", "c9", "name"], filter=want).sort_by("t")
    assert again.equals(healthy)
    expected = frame[(frame.k >= 1) & (frame.c5 > 0.5)][["t", "c0", "c9", "name"]].reset_index(drop=True)
    pd.testing.assert_frame_equal(healthy.to_pandas(), expected)


# ---------------------------------------------------------------------------- dask

def test_dask_read_parquet_over_partitions_and_a_frozen_datanode(pcluster, hfs, frame):
    import dask
    import dask.dataframe as dd

    for i in range(4):
        frame.iloc[i * ROWS // 4:(i + 1) * ROWS // 4].to_parquet(url(pcluster, f"/dask/part-{i}.parquet"))
    ddf = dd.read_parquet(url(pcluster, "/dask/"))
    assert ddf.npartitions == 4
    with dask.config.set(scheduler="threads"):
        healthy = ddf.compute()
        # (dask reads strings as pyarrow strings: the values are compared, not the dtype)
        pd.testing.assert_frame_equal(healthy.reset_index(drop=True), frame, check_dtype=False)
        with frozen_part_way(pcluster, hfs, busiest_datanode(hfs, hfs.find("/dask"))):
            again = ddf.compute()
    pd.testing.assert_frame_equal(again, healthy)
