"""Storage policies: erasure coding ``RS-<k>-<m>-<cell>k``, as HDFS names them, local reconstruction
codes ``LRC-<k>-<l>-<g>-<cell>k``, and replication ``REPLICATE-<n>``.

A policy is k data units + m parity units per stripe and a cell size. It is stored with each file
at the NameNode and every later decode uses the file's own policy, never a module default.

An LRC policy (Azure's Local Reconstruction Codes, Huang et al., ATC '12; ``ec/lrc.py``) is the same
model with m = l + g: the k data units form l local groups of k / l, each with one local (XOR)
parity, and g global parities cover all k data units. One lost or slow unit of a group is rebuilt
from the k / l other members of its group instead of from k units; any g + 1 lost units can still
be decoded (RS-k-m tolerates m). Because an LRC group is not MDS, "at least k units" is not the
test of readability: ask ``Policy.decodable(indices)``.

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
from functools import lru_cache

KIB = 1024
MAX_UNITS = 32                  # k + m; GF(2^8) allows 255, no sane layout needs more than 32
MAX_CELL_SIZE = 64 * 1024 * KIB  # 64 MiB

MAX_LRC_UNITS = 20              # k + l + g: keeps the exhaustive checks of ec/lrc.py cheap

MAX_REPLICAS = 5
REPLICA_CELL_SIZE = 1024 * KIB   # a replicated block is streamed (and its checksums planned) in 1 MiB steps

DEFAULT_POLICY = "RS-6-3-1024k"
BUILTIN_POLICIES: tuple[str, ...] = (
    "RS-3-2-1024k",
    "RS-6-3-1024k",
    "RS-10-4-1024k",
    "RS-6-3-64k",
    "RS-3-2-64k",
    "LRC-6-2-2-1024k",
    "LRC-6-2-2-64k",
    "LRC-12-2-2-1024k",
    "REPLICATE-1",
    "REPLICATE-2",
    "REPLICATE-3",
)

_NAME_RE = re.compile(r"RS-(\d{1,3})-(\d{1,3})-(\d{1,6})([km])", re.IGNORECASE)
_LRC_RE = re.compile(r"LRC-(\d{1,3})-(\d{1,3})-(\d{1,3})-(\d{1,6})([km])", re.IGNORECASE)
_REPLICATE_RE = re.compile(r"REPLICATE-(\d{1,3})", re.IGNORECASE)
_EXPECTED = (f"expected RS-<k>-<m>-<cell>k (e.g. RS-6-3-1024k), LRC-<k>-<l>-<g>-<cell>k (e.g. LRC-6-2-2-64k) "
             f"or REPLICATE-<n> (n = 1..{MAX_REPLICAS})")


@dataclass(frozen=True)
class Policy:
    """k data units, m parity units, ``cell_size`` bytes per cell; ``replicated``: the m units
    are copies of the one data unit (``REPLICATE-<k + m>``), not Reed-Solomon parity;
    ``local_groups`` = l > 0: an LRC, whose m parity units are l local parities, then
    m - l = g global parities (``LRC-<k>-<l>-<g>``).

    Any cell_size >= 1 is accepted here so tests can use tiny cells; policies that have a name
    (``parse_policy``) use whole KiB.
    """

    k: int
    m: int
    cell_size: int
    replicated: bool = False
    local_groups: int = 0

    def __post_init__(self) -> None:
        if self.local_groups:
            g = self.m - self.local_groups
            if self.replicated or self.local_groups < 1 or g < 1 or self.k % self.local_groups:
                raise ValueError(f"bad policy: LRC-<k>-<l>-<g> needs l >= 1 local groups dividing k and "
                                 f"g >= 1 global parities (got k={self.k}, l={self.local_groups}, g={g})")
            if self.units > MAX_LRC_UNITS:
                raise ValueError(f"bad policy: LRC k + l + g must be <= {MAX_LRC_UNITS} (got {self.units})")
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
        shape = (f"LRC-{self.k}-{self.local_groups}-{self.global_parities}" if self.local_groups
                 else f"RS-{self.k}-{self.m}")
        if self.cell_size % KIB == 0:
            return f"{shape}-{self.cell_size // KIB}k"
        return f"{shape}-{self.cell_size}b"

    @property
    def kind(self) -> str:
        """``RS``, ``LRC`` or ``REPLICATE``."""
        return "REPLICATE" if self.replicated else "LRC" if self.local_groups else "RS"

    @property
    def global_parities(self) -> int:
        """g: parity units computed from all k data units (RS: all m of them; REPLICATE: 0)."""
        return 0 if self.replicated else self.m - self.local_groups

    @property
    def tolerance(self) -> int:
        """Lost units (DataNodes) any group survives, whichever they are: m for RS and REPLICATE,
        g + 1 for LRC (every pattern of g + 1, for the built-in shapes checked one by one in
        tests/unit/test_ec_lrc.py; more losses decode only for some patterns)."""
        return self.global_parities + 1 if self.local_groups else self.m

    def decodable(self, indices) -> bool:
        """Whether the units ``indices`` hold enough to decode every data byte of their group:
        any k of an RS group, any one replica, an independent enough set of an LRC group."""
        present = {i for i in indices if 0 <= i < self.units}
        if not self.local_groups:
            return len(present) >= self.k
        from hedgefs.ec import lrc

        return lrc.decodable(self.k, self.local_groups, self.global_parities, present)

    def repair_reads(self, index: int) -> int:
        """Units read to rebuild unit ``index`` when every other unit is there: k (RS), 1
        (a replica), k / l for an LRC data or local parity unit (its group), k for a global one."""
        if self.replicated:
            return 1
        if self.local_groups and index < self.k + self.local_groups:
            return self.k // self.local_groups
        return self.k

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
        """Disk bytes stored per file byte: (k + m) / k; 1.5 for RS-6-3, 1.67 for LRC-6-2-2, 3.0
        for REPLICATE-3."""
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


@lru_cache(maxsize=64)
def parse_policy(name: str) -> Policy:
    """Parse ``RS-<k>-<m>-<n>k`` (or ``...-<n>m`` for MiB), ``LRC-<k>-<l>-<g>-<n>k``, or
    ``REPLICATE-<n>``, into a Policy.

    Raises ValueError with a one-line message fit for a user. Cached (a Policy is frozen; an
    error is not cached): a reader asks for its file's and each group's policy on every read.
    """
    text = name.strip() if isinstance(name, str) else ""
    match = _REPLICATE_RE.fullmatch(text)
    if match is not None:
        n = int(match[1])
        if not 1 <= n <= MAX_REPLICAS:
            raise ValueError(f"bad policy {name!r}: REPLICATE-<n> keeps 1 to {MAX_REPLICAS} replicas (got {n})")
        return replicate(n)
    match = _LRC_RE.fullmatch(text)
    if match is not None:
        return _parse_lrc(name, match)
    match = _NAME_RE.fullmatch(text)
    if match is None:
        raise ValueError(f"unknown policy {name!r}: {_EXPECTED}")
    k, m = int(match[1]), int(match[2])
    cell_size = _cell_size(match[3], match[4])
    if k < 1 or m < 1:
        raise ValueError(f"bad policy {name!r}: k and m must be >= 1; {_EXPECTED}")
    if k + m > MAX_UNITS:
        raise ValueError(f"bad policy {name!r}: k + m must be <= {MAX_UNITS}; {_EXPECTED}")
    _check_cell(name, cell_size)
    return Policy(k, m, cell_size)


def _cell_size(size: str, unit: str) -> int:
    return int(size) * (KIB if unit.lower() == "k" else KIB * KIB)


def _check_cell(name: str, cell_size: int) -> None:
    if not KIB <= cell_size <= MAX_CELL_SIZE:
        raise ValueError(f"bad policy {name!r}: cell size must be 1k..65536k; {_EXPECTED}")


def _parse_lrc(name: str, match: re.Match) -> Policy:
    k, l, g = int(match[1]), int(match[2]), int(match[3])
    if k < 1 or l < 1 or g < 1 or k % l:
        raise ValueError(f"bad policy {name!r}: LRC-<k>-<l>-<g> needs k, l, g >= 1 and l dividing k "
                         f"(l local groups of k / l data units); {_EXPECTED}")
    if k + l + g > MAX_LRC_UNITS:
        raise ValueError(f"bad policy {name!r}: LRC k + l + g must be <= {MAX_LRC_UNITS}; {_EXPECTED}")
    cell_size = _cell_size(match[4], match[5])
    _check_cell(name, cell_size)
    return Policy(k, l + g, cell_size, local_groups=l)
