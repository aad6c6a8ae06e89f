"""Erasure-coding policies: ``RS-<k>-<m>-<cell>k``, as HDFS names them.

A policy is k data units + m parity units per stripe and a cell size. It is stored with each file
at the NameNode and every later decode uses the file's own policy, never a module default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KIB = 1024
MAX_UNITS = 32                  # k + m; GF(2^8) allows 255, no sane layout needs more than 32
MAX_CELL_SIZE = 64 * 1024 * KIB  # 64 MiB

DEFAULT_POLICY = "RS-6-3-1024k"
BUILTIN_POLICIES: tuple[str, ...] = (
    "RS-3-2-1024k",
    "RS-6-3-1024k",
    "RS-10-4-1024k",
    "RS-6-3-64k",
    "RS-3-2-64k",
)

_NAME_RE = re.compile(r"RS-(\d{1,3})-(\d{1,3})-(\d{1,6})([km])", re.IGNORECASE)
_EXPECTED = "expected RS-<k>-<m>-<cell>k, e.g. RS-6-3-1024k"


@dataclass(frozen=True)
class Policy:
    """k data units, m parity units, ``cell_size`` bytes per cell.

    Any cell_size >= 1 is accepted here so tests can use tiny cells; policies that have a name
    (``parse_policy``) use whole KiB.
    """

    k: int
    m: int
    cell_size: int

    def __post_init__(self) -> None:
        if self.k < 1 or self.m < 1:
            raise ValueError(f"bad policy: k and m must be >= 1 (got k={self.k}, m={self.m})")
        if self.k + self.m > MAX_UNITS:
            raise ValueError(f"bad policy: k + m must be <= {MAX_UNITS} (got {self.k + self.m})")
        if not 1 <= self.cell_size <= MAX_CELL_SIZE:
            raise ValueError(f"bad policy: cell size must be 1 B..64 MiB (got {self.cell_size})")

    @property
    def name(self) -> str:
        """Canonical name, cell size in KiB: ``RS-6-3-1024k`` (``RS-3-2-16b`` for test-only sizes)."""
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

    def __str__(self) -> str:
        return self.name


def parse_policy(name: str) -> Policy:
    """Parse ``RS-<k>-<m>-<n>k`` (or ``...-<n>m`` for MiB) into a Policy.

    Raises ValueError with a one-line message fit for a user.
    """
    text = name.strip() if isinstance(name, str) else ""
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
