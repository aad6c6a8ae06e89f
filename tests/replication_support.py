"""What the replication tests share: the block size of their clusters, hedge settings, where a
file's replicas are, whether old units are gone."""

from __future__ import annotations

from hedgefs.client.config import HedgeConfig
from hedgefs.client.fs import FileSystem

B = 1 << 20                       # a replicated block on these clusters
THRESHOLD_MS = 1000
COUNTED = HedgeConfig(threshold_ms=THRESHOLD_MS)
NO_HEDGE = HedgeConfig(enabled=False)


def replicas(fs: FileSystem, path: str) -> list[list[str]]:
    """Per block, the DataNodes of its live replicas in index order."""
    return [[g.units[i].datanode_id for i in sorted(g.units)] for g in fs.stat(path).groups]


def old_units_gone(cluster, group_ids: set[int]) -> bool:
    """No DataNode's disk holds a unit of these (replaced) groups any more."""
    return not any(p.name.split("_")[0] in {str(g) for g in group_ids}
                   for dn in cluster.datanode_ids for p in (cluster.root / dn / "blocks").glob("*/*.blk"))
