"""Block access tokens (HDFS's BlockTokenSecretManager): the NameNode signs, DataNodes check.

With every unit location and every repair command the NameNode hands out a token naming exactly
one unit (group id, unit index, generation), one operation (read, write, or append: a write token
never allows an append, so a committed unit of an erasure-coded group cannot be grown with one)
and an expiry. A
DataNode checks it with the cluster key it shares with the NameNode, locally, before it touches
the unit: no call back to the NameNode, no state.

Encoding (canonical: every field fixed-width, little-endian, in this order, nothing optional)::

    version u8 | op u8 | index u32 | group_id u64 | generation u64 | expiry_ms u64 | mac 32 bytes

``mac`` = HMAC-SHA256(cluster key, b"hedgefs block token\\0" + the 30 bytes before it).

Why an HMAC is enough: only the NameNode and the DataNodes hold the key, and they are the parties
that must trust a token; an HMAC cannot be forged without the key (HMAC-SHA256 is a PRF), and a
fixed-width encoding has exactly one byte string per token, so no two tokens share a MAC and no
field can be shifted into another. The comparison is constant-time (``hmac.compare_digest``).
What a signature would add, DataNodes unable to mint tokens, buys little: a DataNode already
holds the bytes of its own units, and HDFS makes the same trade. A stolen token is worth at most
one operation on one unit until it expires, and it travels only inside TLS.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import struct
import time
from typing import Callable

READ, WRITE, APPEND = 1, 2, 3   # APPEND: grow a replica of a replicated open tail in place
OP_NAMES = {READ: "read", WRITE: "write", APPEND: "append"}
VERSION = 1
_FIELDS = struct.Struct("<BBIQQQ")
_DOMAIN = b"hedgefs block token\0"
MAC_BYTES = 32
SIZE = _FIELDS.size + MAC_BYTES
DEFAULT_LIFETIME_S = 600.0


class TokenError(Exception):
    """A token refused; ``str()`` says why in one line (it names what was refused)."""


@dataclasses.dataclass(frozen=True)
class BlockToken:
    op: int
    group_id: int
    index: int
    generation: int
    expiry_ms: int

    def describe(self) -> str:
        return f"{OP_NAMES.get(self.op, self.op)} token for unit {self.group_id}/{self.index} generation {self.generation}"


def decode(raw: bytes) -> BlockToken:
    """The fields of a token, unchecked (anyone can read a token; only the key can make one)."""
    if len(raw) != SIZE:
        raise TokenError(f"malformed block token ({len(raw)} bytes, expected {SIZE})")
    version, op, index, group_id, generation, expiry_ms = _FIELDS.unpack_from(raw)
    if version != VERSION:
        raise TokenError(f"block token version {version} (this DataNode knows {VERSION})")
    return BlockToken(op, group_id, index, generation, expiry_ms)


class BlockTokens:
    """Signs (NameNode) and checks (DataNode) tokens with the cluster key."""

    def __init__(self, key: bytes, lifetime_s: float = DEFAULT_LIFETIME_S,
                 clock: Callable[[], float] = time.time):
        if len(key) < 16:
            raise ValueError("a cluster key has at least 16 bytes")
        self._key = key
        self.lifetime_s = lifetime_s
        self.clock = clock

    def _mac(self, fields: bytes) -> bytes:
        return hmac.new(self._key, _DOMAIN + fields, hashlib.sha256).digest()

    def sign(self, op: int, group_id: int, index: int, generation: int) -> bytes:
        expiry_ms = int((self.clock() + self.lifetime_s) * 1000)
        fields = _FIELDS.pack(VERSION, op, index, group_id, generation, expiry_ms)
        return fields + self._mac(fields)

    def check(self, raw: bytes, op: int, group_id: int, index: int, generation: int) -> BlockToken:
        """The token if it allows ``op`` on exactly this unit now; TokenError saying why not."""
        if not raw:
            raise TokenError(f"no block token for {OP_NAMES.get(op, op)} of unit {group_id}/{index}")
        token = decode(raw)
        fields = raw[:_FIELDS.size]
        if not hmac.compare_digest(self._mac(fields), raw[_FIELDS.size:]):
            raise TokenError(f"block token for unit {token.group_id}/{token.index} has a bad signature "
                             f"(tampered with, or signed by another cluster's key)")
        if (token.op, token.group_id, token.index, token.generation) != (op, group_id, index, generation):
            raise TokenError(f"{token.describe()} does not allow {OP_NAMES.get(op, op)} of unit "
                             f"{group_id}/{index} generation {generation}")
        late_ms = int(self.clock() * 1000) - token.expiry_ms
        if late_ms > 0:
            raise TokenError(f"{token.describe()} expired {late_ms / 1000:.1f} s ago")
        return token
