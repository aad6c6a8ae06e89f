"""The cluster's view of each DataNode, handed out with a file's locations: where a new client starts.

Every DataNode times the reads it serves (request in to last byte out, a cancelled read at the
time it was cancelled: a hedge loser on a slow DataNode counts, as slow) and sends the last
60 s of them to the NameNode in its heartbeats; ``GetFileInfo`` hands them out per DataNode
holding a unit of the file (``FileInfo.datanode_reads``). A client with no reads of its own to a
DataNode yet would otherwise wait for its first reads there to go overdue (the 250 ms ceiling,
while it knows no healthy p99): the DataNodes' own figures tell it before its first read.

    views = views_from_proto(info)               # datanode id -> View
    slow_by_view(views)                          # datanode id -> why, for the ones to read around

A DataNode that is frozen (its process stopped, its host hung) sends nothing, its figures
included: only its silence says so, and the NameNode hands that out too, as each DataNode's
heartbeat age (``FileInfo.datanode_heartbeat_age_ms``). A DataNode not heard for 4 x as long as
the median DataNode, and for at least 3 s (three heartbeats at the default interval; a loaded
host delays them all alike), is read around as well.

The rule for figures is the latency model's own (latency.py): a DataNode is slow when its median read is
4 x the median DataNode's, and only then; here also at least the 10 ms hedge floor, so that
CPU contention on a shared host (every DataNode's sub-millisecond reads a few times slower, at
random) marks nobody. Figures of fewer than 4 reads, or from fewer than 3 DataNodes, say
nothing. The median, not the p99: a DataNode with a rare slow read is hedged read by read,
not avoided altogether.
"""

from __future__ import annotations

import dataclasses
import statistics

VIEW_MIN_READS = 4        # a DataNode's figures count with at least this many reads behind them
VIEW_PEERS_MIN = 3        # DataNodes with figures needed to compare with
VIEW_FACTOR = 4.0         # slow: a median read 4 x the median DataNode's (latency.py's PEER_FACTOR) ...
VIEW_FLOOR_S = 0.010      # ... and at least the hedge floor (latency.py's FLOOR_S)
UNHEARD_FACTOR = 4.0      # silent: not heard for 4 x the median DataNode's heartbeat age ...
UNHEARD_FLOOR_S = 3.0     # ... and for at least 3 s


@dataclasses.dataclass(frozen=True)
class View:
    """A DataNode's reads of the last 60 s, as it measured them, and its heartbeat's age."""
    reads: int = 0
    p50_s: float = 0.0
    p99_s: float = 0.0
    unheard_s: float | None = None   # since the NameNode last heard it (None: not said)


def views_from_proto(info) -> dict[str, View]:
    """``FileInfo.datanode_reads`` and ``datanode_heartbeat_age_ms`` (ms on the wire) as Views."""
    ages = info.datanode_heartbeat_age_ms
    views = {dn: View(r.reads, r.p50_ms / 1000, r.p99_ms / 1000, ages[dn] / 1000 if dn in ages else None)
             for dn, r in info.datanode_reads.items()}
    views.update({dn: View(unheard_s=ms / 1000) for dn, ms in ages.items() if dn not in views})
    return views


def slow_by_view(views: dict[str, View]) -> dict[str, str]:
    """The DataNodes these figures show slow or silent, each with why (for the log)."""
    out = {}
    heard = [v.unheard_s for v in views.values() if v.unheard_s is not None]
    if len(heard) >= VIEW_PEERS_MIN:
        median = statistics.median(heard)
        bar = max(UNHEARD_FLOOR_S, UNHEARD_FACTOR * median)
        out.update({dn: f"the NameNode has not heard it for {v.unheard_s:.1f} s, the median DataNode "
                        f"for {median:.1f} s" for dn, v in views.items() if v.unheard_s is not None and v.unheard_s >= bar})
    known = {dn: v for dn, v in views.items() if v.reads >= VIEW_MIN_READS}
    if len(known) >= VIEW_PEERS_MIN:
        median = statistics.median(v.p50_s for v in known.values())
        bar = max(VIEW_FLOOR_S, VIEW_FACTOR * median)
        out.update({dn: f"its own reads of the last 60 s: median {v.p50_s * 1000:.1f} ms over {v.reads}, "
                        f"the median DataNode's {median * 1000:.1f} ms"
                    for dn, v in known.items() if v.p50_s >= bar and dn not in out})
    return out
