"""The numbers the latency model (latency.py) judges DataNodes by, and the sizes it judges them per:
what a read of a size may take before it is hedged (``ceiling``; ``cold_threshold`` on a new
connection) and the size classes reads are kept in. Why each number is what it is: docs/design.md.
"""

from hedgefs.client.decayed import DecayedHistogram

# Size classes: reads up to 64 KiB, 256 KiB, 1 MiB, 4 MiB, 16 MiB, and larger.
CLASS_LIMITS = (64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20)

HALF_LIFE_S = 5.0           # memory of what a DataNode's reads of a size take
CLASS_MIN_WEIGHT = 4.0      # reads (decayed) of a size before a DataNode's p99 for it counts
CLASS_MIN_DATANODES = 3     # DataNodes with such a p99 before the threshold is learned, not the ceiling
HEDGE_FACTOR = 1.5          # threshold = 1.5 x the healthy p99 for the size
FLOOR_S = 0.010             # never hedge sooner than this
CEILING_S = 0.250           # never later than this, for a cell-sized read (HubSpot's fixed default)...
CEILING_BYTES_PER_S = 32 << 20   # ... plus the transfer at this rate for bigger ones
COLD_FACTOR, COLD_MIN_S = 4.0, 0.100   # a read on a new connection: judged by 4 x the threshold, >= 100 ms
COLD_HEDGE_FACTOR = 3.0     # ... and hedged at 3 x the threshold (a DataNode answers it 3-4 x slower)
THRESHOLD_CACHE_S = 0.05    # thresholds are recomputed at most this often
RECENT_S = 0.25             # a DataNode is judged on its reads of the last 0.25 s ...
RECENT_MIN = 6              # ... or its last 6, if it had fewer
JUDGE_MIN = 4               # reads before a DataNode can be judged slow at all
SLOW_RATIO = 2.0            # a slow read: at least twice its threshold (3 x the healthy p99)
PEER_FACTOR = 4.0           # ... and its recent median must be 4 x the median DataNode's
PEERS_MIN = 3               # DataNodes with recent reads needed to compare with
SLOW_FORGET_S = 10.0        # slowness without fresh evidence for this long is forgotten
PROBE_INTERVAL_S = 0.25     # at most one probe per DataNode this often, one at a time
SILENT_MIN_S = 1.0      # with reads in flight and no answer this long (at least): silent
SILENT_FACTOR = 20.0    # ... or 20 x the healthy p99, whichever is longer
GONE_MIN_S = 5.0        # reads in flight, none begun (no response header), no answer this long (at least): gone
GONE_FACTOR = 5.0       # ... or 5 x the healthy p99, whichever is longer; a read only it could finish fails
FAILURE_MEMORY_S = 10.0     # a DataNode whose read failed this recently is a rebuild's last choice
MAX_DATANODES = 2048        # DataNodes remembered (~10 KiB each at most); the least recent is forgotten


def size_class(nbytes: int) -> int:
    for i, limit in enumerate(CLASS_LIMITS):
        if nbytes <= limit:
            return i
    return len(CLASS_LIMITS)


def ceiling(nbytes: int) -> float:
    """The latest a read of ``nbytes`` is hedged: 250 ms for a cell, plus the transfer at 32 MiB/s."""
    return CEILING_S + nbytes / CEILING_BYTES_PER_S


def cold_threshold(threshold: float, nbytes: int) -> float:
    """What a read on a new connection is judged by, its size's threshold being ``threshold``."""
    return min(ceiling(nbytes), max(COLD_MIN_S, COLD_FACTOR * threshold))


def latency_histogram(now: float) -> DecayedHistogram:
    """100 us .. 2 min in 15 % buckets (100 of them), half-life 5 s."""
    return DecayedHistogram(100e-6, 120.0, 1.15, HALF_LIFE_S, now)
