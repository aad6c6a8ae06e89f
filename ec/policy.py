"""Storage policies: erasure coding ``RS-<k>-<m>-<cell>k``, as HDFS names them, and replication
``REPLICATE-<n>``.

A policy is k data units + m parity units per stripe and a cell size. It is stored with each file
at the NameNode and every later decode uses the file's own policy, never a module default.

Replication is the same model with k = 1: ``REPLICATE-n`` is one data unit and n - 1 units that
are copies of it (a repetition code: any one of the n is the data, as any k of an RS group are).
So a replicated file's block is a block group of n units, each unit a *replica* on its own
DataNode; placement, receipts, repair, deletes and block reports need nothing else, and only the
codec (``ec/codec.py``: copies, no arithmetic), the reader (any replica answers the whole read)
and the words shown to users differ. The cell is then only the grain a writer streams in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KIB = 1024
MAX_UNITS = 32                  # k + m; GF(2^8) allows 255, no sane layout needs more than 32
MAX_CELL_SIZE = 64 * 1024 * KIB  # 64 MiB

MAX_REPLICAS = 5
REPLICA_CELL_SIZE = 1024 * KIB   # a replicated block is streamed (and its checksums planned) in 1 MiB steps

DEFAULT_POLICY = "RS-6-3-1024k"
BUILTIN_POLICIES: tuple[str, ...] = (
    "RS-3-2-1024k",
    "RS-6-3-1024k",
    "RS-10-4-1024k",
    "RS-6-3-64k",
    "RS-3-2-64k",
    "REPLICATE-1",
    "REPLICATE-2",
    "REPLICATE-3",
)

_NAME_RE = re.compile(r"RS-(\d{1,3})-(\d{1,3})-(\d{1,6})([km])", re.IGNORECASE)
_REPLICATE_RE = re.compile(r"REPLICATE-(\d{1,3})", re.IGNORECASE)
_EXPECTED = f"expected RS-<k>-<m>-<cell>k (e.g. RS-6-3-1024k) or REPLICATE-<n> (n = 1..{MAX_REPLICAS})"


@dataclass(frozen=True)
class Policy:
    """k data units, m parity units, ``cell_size`` bytes per cell; ``replicated``: the m units
    are copies of the one data unit (``REPLICATE-<k + m>``), not Reed-Solomon parity.

    Any cell_size >= 1 is accepted here so tests can use tiny cells; policies that have a name
    (``parse_policy``) use whole KiB.
    """

    k: int
    m: int
    cell_size: int
    replicated: bool = False

    def __post_init__(self) -> None:
        if self.replicated:
            if self.k != 1 or not 1 <= self.units <= MAX_REPLICAS:
                raise ValueError(f"bad policy: replication is 1 data unit and 0..{MAX_REPLICAS - 1} copies "
                                 f"(got k={self.k}, m={self.m})")
        elif self.k < 1 or self.m < 1:
            raise ValueError(f"bad policy: k and m must be >= 1 (got k={self.k}, m={self.m})")
        if self.k + self.m > MAX_UNITS:
            raise ValueError(f"bad policy: k + m must be <= {MAX_UNITS} (got {self.k + self.m})")
        if not 1 <= self.cell_size <= MAX_CELL_SIZE:
            raise ValueError(f"bad policy: cell size must be 1 B..64 MiB (got {self.cell_size})")

    @property
    def name(self) -> str:
        """Canonical name, cell size in KiB: ``RS-6-3-1024k`` (``RS-3-2-16b`` for test-only
        sizes), or ``REPLICATE-3``."""
        if self.replicated:
            return f"REPLICATE-{self.units}"
        if self.cell_size % KIB == 0:
            return f"RS-{self.k}-{self.m}-{self.cell_size // KIB}k"
        return f"RS-{self.k}-{self.m}-{self.cell_size}b"

    @property
    def units(self) -> int:
        """Units per stripe (= internal blocks per block group): k + m."""
        return self.k + self.m

    @property
    def stripe_data_size(self) -> int:
        """Data bytes in one full stripe: k * cell_size."""
        return self.k * self.cell_size

    @property
    def overhead(self) -> float:
        """Disk bytes stored per file byte: (k + m) / k; 1.5 for RS-6-3, 3.0 for REPLICATE-3."""
        return self.units / self.k

    def min_stored(self, min_replicas: int) -> int:
        """Units a block group must have stored for a write to succeed: k (fewer cannot be read
        back), or for replication ``min_replicas`` (HDFS's dfs.namenode.replication.min), at most n."""
        return min(self.units, max(1, min_replicas)) if self.replicated else self.k

    def __str__(self) -> str:
        return self.name


def replicate(n: int) -> Policy:
    """``REPLICATE-n``: n copies of every block, on n DataNodes."""
    return Policy(1, n - 1, REPLICA_CELL_SIZE, replicated=True)


def parse_policy(name: str) -> Policy:
    """Parse ``RS-<k>-<m>-<n>k`` (or ``...-<n>m`` for MiB), or ``REPLICATE-<n>``, into a Policy.

    Raises ValueError with a one-line message fit for a user.
    """
    text = name.strip() if isinstance(name, str) else ""
    match = _REPLICATE_RE.fullmatch(text)
    if match is not None:
        n = int(match[1])
        if not 1 <= n <= MAX_REPLICAS:
            raise ValueError(f"bad policy {name!r}: REPLICATE-<n> keeps 1 to {MAX_REPLICAS} replicas (got {n})")
        return replicate(n)
    match = _NAME_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"unknown policy {name!r}: {_EXPECTED}")
    k, m, size = int(match[1]), int(match[2]), int(match[3])
    cell_size = size * (KIB if match[4].lower() == "k" else KIB * KIB)
    if k < 1 or m < 1:
        raise ValueError(f"bad policy {name!r}: k and m must be >= 1; {_EXPECTED}")
    if k + m > MAX_UNITS:
        raise ValueError(f"bad policy {name!r}: k + m must be <= {MAX_UNITS}; {_EXPECTED}")
    if not KIB <= cell_size <= MAX_CELL_SIZE:
        raise ValueError(f"bad policy {name!r}: cell size must be 1k..65536k; {_EXPECTED}")
    return Policy(k, m, cell_size)
