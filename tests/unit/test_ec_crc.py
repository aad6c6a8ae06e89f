"""CRC32C combine: the CRC of A + B from crc(A), crc(B) and len(B), checked against crc32c itself.

Cases: empty pieces on either side, 1 byte, lengths around powers of two (the table's steps),
a 64 KiB chunk, and many uneven pieces combined in order.
"""

import random

import crc32c
import pytest

from hedgefs.ec.crc import combine, combine_all


def _bytes(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


@pytest.mark.parametrize("len1,len2", [
    (0, 0), (0, 1), (1, 0), (1, 1), (3, 7), (255, 256), (256, 257), (4095, 4097), (1, 65536), (65536, 65536),
    (100_000, 1 << 17),
])
def test_combine_equals_crc_of_the_concatenation(len1, len2):
    a, b = _bytes(len1, len1), _bytes(len2, len2 + 1)
    assert combine(crc32c.crc32c(a), crc32c.crc32c(b), len2) == crc32c.crc32c(a + b)


def test_combine_all_of_uneven_pieces():
    rng = random.Random(7)
    data = _bytes(300_000, 3)
    cuts = sorted(rng.sample(range(1, len(data)), 40))
    pieces = [data[i:j] for i, j in zip([0, *cuts], [*cuts, len(data)])]
    assert combine_all((crc32c.crc32c(p), len(p)) for p in pieces) == (crc32c.crc32c(data), len(data))


def test_combine_all_of_nothing_is_the_crc_of_no_bytes():
    assert combine_all([]) == (crc32c.crc32c(b""), 0)


def test_one_flipped_byte_changes_the_combined_crc():
    data = bytearray(_bytes(200_000, 5))
    def chunked(b):
        return combine_all((crc32c.crc32c(b[i:i + 65536]), len(b[i:i + 65536])) for i in range(0, len(b), 65536))

    whole = chunked(data)
    data[123_456] ^= 1
    flipped = chunked(data)
    assert whole != flipped


def test_negative_length_is_refused():
    with pytest.raises(ValueError):
        combine(0, 0, -1)
