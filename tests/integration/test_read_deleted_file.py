"""A file deleted under an open reader: the read ends at once with "was deleted while it was
read", even when one of its DataNodes is frozen (before, the read waited for that DataNode's
deadline, the longest reads of every chaos run)."""

import pytest

from conftest import GROUP, client, pattern, wait_until
from hedgefs.client import transport
from hedgefs.client.errors import FileChanged
from hedgefs.datanode.storage import parse_name


@pytest.mark.insecure_only("the reader's logic: no channel involved")
def test_a_read_of_a_deleted_file_ends_without_waiting_for_a_frozen_datanode(private_cluster, monkeypatch):
    cluster = private_cluster
    # A frozen DataNode would hold this read for ten minutes: only the file's deletion can end it.
    monkeypatch.setattr(transport, "UNIT_READ_TIMEOUT_S", 600.0)
    with client(cluster.namenode) as fs:
        fs.write_bytes("/doomed", pattern(GROUP, seed=5))
        reader = fs.open("/doomed")
        group = reader.status.groups[0]
        frozen = group.units[0].datanode_id
        holders = {u.datanode_id for u in group.units.values()} - {frozen}

        def units_left() -> list[str]:
            return [f"{dn}/{p.name}" for dn in holders for p in (cluster.root / dn / "blocks").glob("*/*.blk")
                    if parse_name(p.name)[0] == group.id]

        cluster.freeze(frozen)
        try:
            fs.delete("/doomed")
            wait_until(lambda: not units_left(), 30, "the live DataNodes deleted the file's units",
                       detail=units_left)
            read = reader.submit(0, GROUP)
            with pytest.raises(FileChanged, match="^/doomed was deleted while it was read$"):
                read.result(timeout=120)   # ten minutes without the check; a few seconds with it
        finally:
            cluster.thaw(frozen)
