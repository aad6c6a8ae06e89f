"""Local Reconstruction Codes, LRC(k, l, g) (Huang et al., "Erasure Coding in Windows Azure
Storage", ATC '12): the matrix of the code and which unit sets decode which units. Pure Python,
run once per decode pattern, never per byte (the bytes go through ``ec/codec.py``'s kernels).

Unit indices: data ``0..k-1``; local parity ``k + j`` of local group j (``j = 0..l-1``), the XOR
of the group's k / l data units ``j*k/l .. (j+1)*k/l - 1``; global parity ``k + l + t``
(``t = 0..g-1``) = sum over all data units i of c_i^(t+1) * d_i, with c_i = 2^i in GF(2^8).
LRC(6, 2, 2):

    group 0:   d0  d1  d2   L0 = d0 + d1 + d2            units 0 1 2 | 6
    group 1:   d3  d4  d5   L1 = d3 + d4 + d5            units 3 4 5 | 7
    global:    G0 = sum c_i   d_i,  G1 = sum c_i^2 d_i   units 8 9

The global rows are Azure's construction (p0 = sum a_i x_i + sum b_i y_i, p1 = sum a_i^2 x_i +
sum b_i^2 y_i, with distinct non-zero coefficients), here over GF(2^8), where a = 2^0..2^2 and
b = 2^3..2^5. tests/unit/test_ec_lrc.py checks every loss pattern of the built-in shapes: every g + 1
lost units decode, and LRC(6, 2, 2) decodes 180 of the 210 patterns of 4 lost units (85.7 %, the
paper's "86 %"); the 30 others are undecodable by any code of this shape (a group and its local
parity lost with too few global parities left), so the code is maximally recoverable.

"Decodes" is linear algebra, not counting: units S rebuild unit w when w's row of the encoding
matrix is in the span of S's rows (a lost data unit of an intact group from its 3 group peers, for
instance); the group's data is readable when S's rows have rank k.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

from hedgefs.ec.gf256 import EXP, Basis, Matrix, combination, mul


def check_shape(k: int, l: int, g: int) -> None:
    if k < 1 or l < 1 or g < 1 or k % l or k + l + g > 255:
        raise ValueError(f"LRC({k},{l},{g}) is not a valid code: need l dividing k, g >= 1")


def group_size(k: int, l: int) -> int:
    """Data units per local group: k / l."""
    return k // l


def group_of(k: int, l: int, index: int) -> int | None:
    """The local group of a data or local parity unit; None for a global parity."""
    if index < k:
        return index // (k // l)
    if index < k + l:
        return index - k
    return None


def group_members(k: int, l: int, group: int) -> tuple[int, ...]:
    """The units of local group ``group``: its data units, then its local parity."""
    size = k // l
    return tuple(range(group * size, (group + 1) * size)) + (k + group,)


@lru_cache(maxsize=None)
def encoding_matrix(k: int, l: int, g: int) -> Matrix:
    """The (k + l + g) x k matrix: unit u's bytes = row u . data, column by column."""
    check_shape(k, l, g)
    rows = [tuple(int(i == u) for i in range(k)) for u in range(k)]
    size = k // l
    rows += [tuple(int(i // size == j) for i in range(k)) for j in range(l)]
    for t in range(g):
        row = []
        for i in range(k):
            c, v = EXP[i % 255], 1
            for _ in range(t + 1):
                v = mul(v, c)
            row.append(v)
        rows.append(tuple(row))
    return tuple(rows)


def parity_matrix(k: int, l: int, g: int) -> Matrix:
    """The l + g parity rows: what a writer encodes a stripe with."""
    return encoding_matrix(k, l, g)[k:]


@lru_cache(maxsize=65536)
def _rank(k: int, l: int, g: int, units: frozenset[int]) -> int:
    rows = encoding_matrix(k, l, g)
    basis = Basis()
    for u in sorted(units):
        basis.add(rows[u])
    return len(basis)


def decodable(k: int, l: int, g: int, units: Iterable[int]) -> bool:
    """Whether ``units`` determine all k data units (and so every unit of the group)."""
    return _rank(k, l, g, frozenset(units)) == k


def covers(k: int, l: int, g: int, sources: Iterable[int], wants: Iterable[int]) -> bool:
    """Whether every unit of ``wants`` can be computed from the units ``sources``."""
    rows = encoding_matrix(k, l, g)
    basis = Basis()
    for u in sorted(set(sources)):
        basis.add(rows[u])
    return all(basis.spans(rows[w]) for w in wants)


@lru_cache(maxsize=4096)
def decode_matrix(k: int, l: int, g: int, sources: tuple[int, ...], wants: tuple[int, ...]) -> Matrix | None:
    """Rows turning the ``sources`` units (in that order) into the ``wants`` units; None if some
    wanted unit is not determined by them."""
    rows = encoding_matrix(k, l, g)
    return combination(tuple(rows[u] for u in sources), tuple(rows[w] for w in wants))
