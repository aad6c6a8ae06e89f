"""CRC32C arithmetic: the CRC of concatenated bytes from the CRCs of the pieces. Pure, no I/O.

A file's checksum in hedgefs is the CRC32C of its bytes (HDFS's COMPOSITE_CRC idea): it does not
depend on how the bytes are stored (RS-6-3, RS-3-2, a local file...), yet it can be computed
without moving the bytes, because DataNodes keep a CRC32C per 64 KiB chunk of every internal block
and CRCs combine:

    crc(A + B) = combine(crc(A), crc(B), len(B))

``combine`` is zlib's ``crc32_combine`` (the x^(8 * len(B)) mod P multiplication of zlib >= 1.2.12)
over the CRC32C (Castagnoli) polynomial, reflected, 0x82F63B78. It costs one GF(2) multiply per
combine once the power for a length is known (cached: most pieces are 64 KiB chunks or whole cells).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable

POLY = 0x82F63B78        # CRC32C, reflected
_TOP = 1 << 31           # x^0 in the reflected representation


def _multmodp(a: int, b: int) -> int:
    """a * b mod P, both polynomials in reflected form."""
    m = _TOP
    p = 0
    while a:
        if a & m:
            p ^= b
            a ^= m
        m >>= 1
        b = (b >> 1) ^ POLY if b & 1 else b >> 1
    return p


def _powers() -> list[int]:
    """x^(2^k) mod P for k = 0..31."""
    table = [1 << 30]    # x^1
    for _ in range(31):
        table.append(_multmodp(table[-1], table[-1]))
    return table


_X2N = _powers()


@lru_cache(maxsize=1024)
def _x8nmodp(n: int) -> int:
    """x^(8n) mod P: what appending n zero bytes multiplies a CRC's register by."""
    p, k = _TOP, 3
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return p


def combine(crc1: int, crc2: int, len2: int) -> int:
    """CRC32C of A + B, given crc1 = CRC32C(A), crc2 = CRC32C(B) and len2 = len(B)."""
    if len2 < 0:
        raise ValueError(f"length must be >= 0 (got {len2})")
    return _multmodp(_x8nmodp(len2), crc1) ^ crc2


def combine_all(pieces: Iterable[tuple[int, int]]) -> tuple[int, int]:
    """(CRC32C, length) of the concatenation of pieces given as (crc, length), in order."""
    crc, total = 0, 0
    for piece_crc, length in pieces:
        crc = combine(crc, piece_crc, length)
        total += length
    return crc, total
