"""The RS codec: parity against reedsolo, every loss pattern, ranges, short cells, both backends.

reedsolo is the oracle for parity (column by column, a few KiB: it is slow). For larger buffers
the oracle is a plain 8-bit-table GF multiply, independent of the backends' tricks. The numpy
backend always runs; the ISA-L tests are skipped when no libisal can be loaded.
"""

import itertools

import numpy as np
import pytest
import reedsolo

from hedgefs.ec import codec as codec_module
from hedgefs.ec.backend_numpy import CHUNK, MUL
from hedgefs.ec.codec import available_backends, default_backend, get_codec
from hedgefs.ec.gf256 import decode_matrix, generator_matrix, invert, mul

HAVE_ISAL = "isal" in available_backends()
needs_isal = pytest.mark.skipif(
    not HAVE_ISAL,
    reason="libisal not loadable (no system libisal, no pyeclib.libs/libisal*.so*): numpy only",
)
BACKENDS = ["numpy", pytest.param("isal", marks=needs_isal)]


def rng(seed=0):
    return np.random.default_rng(seed)


def random_cells(k, length, seed=0):
    r = rng(seed)
    return [r.integers(0, 256, length, dtype=np.uint8) for _ in range(k)]


def reference_encode(k, m, cells, length):
    """parity = G . data with one 8-bit table lookup per byte; short cells zero-padded."""
    padded = [np.pad(np.asarray(c, dtype=np.uint8), (0, length - len(c))) for c in cells]
    out = []
    for row in generator_matrix(k, m):
        acc = np.zeros(length, dtype=np.uint8)
        for coef, cell in zip(row, padded):
            acc ^= MUL[coef][cell]
        out.append(acc)
    return out


def reedsolo_parity(k, m, cells):
    rs = reedsolo.RSCodec(m)
    length = len(cells[0])
    columns = [rs.encode(bytes(int(c[i]) for c in cells))[k:] for i in range(length)]
    return [bytes(col[p] for col in columns) for p in range(m)]


# --- the GF(2^8) matrices -------------------------------------------------------------------


@pytest.mark.parametrize("k, m", [(6, 3), (3, 2), (10, 4), (1, 1), (2, 5)])
def test_generator_matrix_is_reedsolo_parity_of_unit_vectors(k, m):
    rs = reedsolo.RSCodec(m)
    g = generator_matrix(k, m)
    for j in range(k):
        message = bytes(int(i == j) for i in range(k))
        assert tuple(rs.encode(message)[k:]) == tuple(row[j] for row in g)


def test_invert_gives_identity():
    g = generator_matrix(6, 3)
    a = tuple(tuple(int(i == j) for j in range(6)) for i in range(3)) + g  # rows 0,1,2,6,7,8
    a_inv = invert(a)
    for i in range(6):
        for j in range(6):
            value = 0
            for t in range(6):
                value ^= mul(a[i][t], a_inv[t][j])
            assert value == int(i == j)


def test_decode_matrix_of_data_survivors_is_the_generator():
    assert decode_matrix(6, 3, (0, 1, 2, 3, 4, 5), (6, 7, 8)) == generator_matrix(6, 3)


# --- parity against reedsolo ----------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("k, m, length", [(6, 3, 3001), (3, 2, 2048), (10, 4, 1500)])
def test_parity_equals_reedsolo_column_by_column(backend, k, m, length):
    cells = random_cells(k, length, seed=k * 100 + m)
    parity = get_codec(k, m, backend).encode(cells)
    assert len(parity) == m
    expected = reedsolo_parity(k, m, cells)
    for p in range(m):
        assert parity[p].dtype == np.uint8 and len(parity[p]) == length
        assert parity[p].tobytes() == expected[p]


@pytest.mark.parametrize("backend", BACKENDS)
def test_short_cells_match_reedsolo_on_zero_padded_columns(backend):
    lengths = [1000, 1000, 999, 500, 1, 0]  # a short last stripe, cells as long as their data
    cells = [c[:n] for c, n in zip(random_cells(6, 1000, seed=7), lengths)]
    parity = get_codec(6, 3, backend).encode(cells)
    padded = [np.pad(c, (0, 1000 - len(c))) for c in cells]
    assert [p.tobytes() for p in parity] == reedsolo_parity(6, 3, padded)


# --- every loss pattern ---------------------------------------------------------------------


def _all_units(k, m, length, seed=1):
    data = random_cells(k, length, seed)
    return data + reference_encode(k, m, data, length)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("k, m, length", [(6, 3, 4099), (3, 2, 1031), (10, 4, 257)])
def test_every_way_to_lose_m_units_decodes(backend, k, m, length):
    """RS(6,3): all C(9,6) = 84 ways to lose 3 of 9; RS(3,2): 10; RS(10,4): 1001."""
    units = _all_units(k, m, length)
    codec = get_codec(k, m, backend)
    patterns = list(itertools.combinations(range(k + m), m))
    assert len(patterns) == {(6, 3): 84, (3, 2): 10, (10, 4): 1001}[k, m]
    for lost in patterns:
        survivors = {u: units[u] for u in range(k + m) if u not in lost}
        rebuilt = codec.decode(survivors, lost, length)
        assert list(rebuilt) == list(lost)
        for u in lost:
            assert np.array_equal(rebuilt[u], units[u]), (lost, u)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fewer_lost_than_m_and_extra_survivors(backend):
    units = _all_units(6, 3, 600)
    codec = get_codec(6, 3, backend)
    for lost in itertools.chain.from_iterable(
        itertools.combinations(range(9), n) for n in (1, 2)
    ):
        survivors = {u: units[u].tobytes() for u in range(9) if u not in lost}
        rebuilt = codec.decode(survivors, lost, 600)
        for u in lost:
            assert np.array_equal(rebuilt[u], units[u])


@pytest.mark.parametrize("backend", BACKENDS)
def test_decode_any_sub_range(backend):
    """Columns are independent: a range of each survivor rebuilds the same range."""
    length = 5000
    units = _all_units(6, 3, length, seed=3)
    codec = get_codec(6, 3, backend)
    r = rng(4)
    patterns = list(itertools.combinations(range(9), 3))
    for _ in range(200):
        lost = patterns[r.integers(len(patterns))]
        a = int(r.integers(0, length))
        b = int(r.integers(a, length + 1))
        survivors = {u: memoryview(units[u])[a:b] for u in range(9) if u not in lost}
        rebuilt = codec.decode(survivors, lost, b - a)
        for u in lost:
            assert np.array_equal(rebuilt[u], units[u][a:b]), (lost, a, b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_short_survivors_are_zero_padded(backend):
    """A short last stripe: survivors hold fewer bytes than the decode length."""
    lengths = [700, 700, 650, 300, 0, 0]
    data = [c[:n] for c, n in zip(random_cells(6, 700, seed=5), lengths)]
    codec = get_codec(6, 3, backend)
    parity = codec.encode(data)
    units = list(data) + parity
    for lost in itertools.combinations(range(9), 3):
        survivors = {u: units[u] for u in range(9) if u not in lost}
        rebuilt = codec.decode(survivors, lost, 700)
        for u in lost:
            assert len(rebuilt[u]) == 700
            assert rebuilt[u][: len(units[u])].tobytes() == bytes(units[u])
            assert not rebuilt[u][len(units[u]):].any()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("length", [0, 1, 2, 3, 15, 16, 17, 2 * CHUNK + 1, 4 * CHUNK + 6, 3 * CHUNK - 1])
def test_lengths_around_kernel_boundaries(backend, length):
    """Odd bytes, empty cells, and the numpy kernel's chunk edges, with ragged short cells."""
    full = random_cells(6, length, seed=length)
    cuts = [length, length, max(0, length - 1), length // 2, max(0, length - CHUNK * 2 - 3), 0]
    cells = [c[:n] for c, n in zip(full, cuts)]
    codec = get_codec(6, 3, backend)
    parity = codec.encode(cells)
    assert [p.tobytes() for p in parity] == [p.tobytes() for p in reference_encode(6, 3, cells, length)]
    units = list(cells) + parity
    for lost in [(0, 1, 2), (3, 4, 5), (0, 6, 8), (1, 3, 7)]:
        rebuilt = codec.decode({u: units[u] for u in range(9) if u not in lost}, lost, length)
        for u in lost:
            assert rebuilt[u][: len(units[u])].tobytes() == bytes(units[u])
            assert not rebuilt[u][len(units[u]):].any()


# --- the two backends agree byte for byte ---------------------------------------------------


@needs_isal
def test_backends_identical_on_all_84_patterns_and_random_ranges():
    numpy_codec, isal_codec = get_codec(6, 3, "numpy"), get_codec(6, 3, "isal")
    r = rng(9)
    data = [r.integers(0, 256, 70_001, dtype=np.uint8) for _ in range(6)]
    parity_n, parity_i = numpy_codec.encode(data), isal_codec.encode(data)
    assert all(np.array_equal(a, b) for a, b in zip(parity_n, parity_i))
    units = data + parity_n
    for lost in itertools.combinations(range(9), 3):
        a = int(r.integers(0, 70_001))
        b = int(r.integers(a, 70_002))
        survivors = {u: units[u][a:b] for u in range(9) if u not in lost}
        want = list(lost) + [u for u in range(9) if u not in lost][:2]
        got_n = numpy_codec.decode(survivors, want, b - a)
        got_i = isal_codec.decode(survivors, want, b - a)
        for u in want:
            assert np.array_equal(got_n[u], got_i[u]), (lost, a, b, u)
            assert np.array_equal(got_n[u], units[u][a:b])


@needs_isal
def test_isal_backend_names_its_library():
    codec = get_codec(6, 3, "isal")
    assert codec.backend == "isal"
    assert "isal" in codec.library


# --- interface details ----------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_fewer_than_k_units_raises(backend):
    units = _all_units(6, 3, 100)
    codec = get_codec(6, 3, backend)
    with pytest.raises(ValueError, match="^need 6 units, got 5$"):
        codec.decode({u: units[u] for u in (0, 2, 4, 6, 8)}, [1], 100)
    with pytest.raises(ValueError, match="^need 6 units, got 0$"):
        codec.decode({}, [1], 100)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_arguments_raise(backend):
    codec = get_codec(6, 3, backend)
    cells = random_cells(6, 10)
    with pytest.raises(ValueError):
        codec.encode(cells[:5])
    with pytest.raises(ValueError):
        codec.encode([cells[0][:5]] + cells[1:])  # a cell longer than the first
    units = {u: cells[0] for u in range(6)}
    with pytest.raises(ValueError):
        codec.decode(units, [9], 10)
    with pytest.raises(ValueError):
        codec.decode({**units, 12: cells[0]}, [6], 10)
    with pytest.raises(ValueError):
        codec.decode(units, [6], -1)
    with pytest.raises(TypeError):
        codec.encode([c.astype(np.uint16) for c in cells])


@pytest.mark.parametrize("backend", BACKENDS)
def test_buffer_types_and_wanted_units_that_are_present(backend):
    data = random_cells(6, 64, seed=11)
    codec = get_codec(6, 3, backend)
    expected = reference_encode(6, 3, data, 64)
    as_types = [
        data[0].tobytes(),
        bytearray(data[1].tobytes()),
        memoryview(data[2].tobytes()),
        data[3],
        np.repeat(data[4], 2)[::2],  # a strided, non-contiguous array
        memoryview(np.repeat(data[5], 2).tobytes())[::2],  # a non-contiguous memoryview
    ]
    assert all(np.array_equal(a, b) for a, b in zip(codec.encode(as_types), expected))
    units = dict(enumerate(data + expected))
    units[7] = memoryview(units[7].tobytes())[::1]
    # Want units that are present (returned as padded copies), duplicates once, longer buffers cut.
    out = codec.decode({**units, 0: np.concatenate([data[0], data[0]])}, [0, 7, 7, 8], 64)
    assert list(out) == [0, 7, 8]
    assert np.array_equal(out[0], data[0]) and np.array_equal(out[8], expected[2])
    assert out[0].flags.writeable


def test_more_than_k_units_uses_the_first_k_by_index():
    data = random_cells(6, 32, seed=12)
    units = dict(enumerate(data + reference_encode(6, 3, data, 32)))
    units[8] = np.zeros(32, dtype=np.uint8)  # a corrupt unit past the first k is never read
    del units[2]
    out = get_codec(6, 3, "numpy").decode(units, [2], 32)
    assert np.array_equal(out[2], data[2])


def test_get_codec_caches_and_selects_backends(monkeypatch):
    assert get_codec(6, 3, "numpy") is get_codec(6, 3, "numpy")
    assert get_codec(6, 3, "numpy").backend == "numpy"
    assert "numpy" in available_backends()
    with pytest.raises(ValueError, match="unknown ec backend"):
        get_codec(6, 3, "cuda")
    monkeypatch.setenv("HEDGEFS_EC_BACKEND", "numpy")
    assert default_backend() == "numpy"
    assert get_codec(3, 2).backend == "numpy"
    monkeypatch.delenv("HEDGEFS_EC_BACKEND")
    assert default_backend() == available_backends()[0]
    with pytest.raises(ValueError):
        get_codec(0, 3)


def test_forcing_isal_without_the_library_raises(monkeypatch):
    monkeypatch.setattr(codec_module, "_isal", (None, "no libisal found"))
    monkeypatch.setattr(codec_module, "_codecs", {})
    assert available_backends() == ["numpy"]
    monkeypatch.setenv("HEDGEFS_EC_BACKEND", "isal")
    with pytest.raises(ValueError, match="'isal' is not available: no libisal found"):
        get_codec(6, 3)
    monkeypatch.delenv("HEDGEFS_EC_BACKEND")
    assert get_codec(6, 3).backend == "numpy"


@pytest.mark.parametrize("backend", BACKENDS)
def test_encode_into_reused_buffers(backend):
    codec = get_codec(6, 3, backend)
    out = [np.full(100, 7, dtype=np.uint8) for _ in range(3)]
    for length in (100, 61):  # a short last stripe into the same buffers
        cells = [c[: length - (u % 2)] for u, c in enumerate(random_cells(6, length, seed=length))]
        parity = codec.encode(cells, out=out)
        expected = reference_encode(6, 3, cells, length)
        assert all(np.array_equal(p, e) for p, e in zip(parity, expected))
        assert all(np.shares_memory(p, o) for p, o in zip(parity, out))
    with pytest.raises(ValueError):
        codec.encode(random_cells(6, 101), out=out)  # too small
    with pytest.raises(ValueError):
        codec.encode(random_cells(6, 10), out=out[:2])


def test_a_replicated_policy_codes_by_copying():
    """REPLICATE-n through the codec interface: parity is the data cell itself (no copy, no
    arithmetic) and any unit decodes every other, padded like a short RS cell."""
    from hedgefs.ec.codec import CopyCodec, codec_for
    from hedgefs.ec.policy import parse_policy

    codec = codec_for(parse_policy("REPLICATE-3"))
    assert isinstance(codec, CopyCodec) and (codec.k, codec.m) == (1, 2)
    cell = memoryview(bytes(range(200)))
    assert all(p is cell for p in codec.encode([cell]))
    out = codec.decode({2: bytes(range(150))}, [0, 1], 200)
    assert bytes(out[0]) == bytes(range(150)) + bytes(50) and bytes(out[1]) == bytes(out[0])
    with pytest.raises(ValueError):
        codec.decode({}, [0], 10)
    with pytest.raises(ValueError):
        codec.decode({3: b"x"}, [0], 1)
    assert codec_for(parse_policy("RS-6-3-1024k")).m == 3


def test_a_replicated_decode_is_a_copy_not_a_view_of_its_input():
    """Codec.decode promises new arrays: a caller may give its source buffers back to a pool
    (and the pool poison them) while it still holds what decode returned."""
    from hedgefs.ec.codec import codec_for
    from hedgefs.ec.policy import parse_policy

    source = bytearray(range(100))
    out = codec_for(parse_policy("REPLICATE-3")).decode({1: memoryview(source)}, [0], 100)
    source[:] = b"\xdb" * 100   # the pool's poison
    assert bytes(out[0]) == bytes(range(100))
