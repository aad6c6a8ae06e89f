"""The Reed-Solomon codec: systematic RS(k, m) over GF(2^8), one interface, two backends.

Parity equals, byte column by byte column, what ``reedsolo.RSCodec(m)`` appends to the k data
bytes of that column (data unit 0 is message byte 0). Encode is parity = G . data; decode picks
k surviving units and multiplies them by the inverse of their rows of [I; G]. Every column is
independent, so any byte range of the cells can be encoded or decoded on its own, and a short
cell is the same as a cell padded with zeros.

Backends, behind ``Codec``: ``isal`` (ISA-L through ctypes, when a libisal can be loaded) and
``numpy`` (always). ``HEDGEFS_EC_BACKEND=numpy|isal`` forces one.

A replicated policy's codec is ``CopyCodec``: the same interface, where parity is the data unit
itself and any unit decodes every other. An LRC policy's is ``LrcCodec`` (``ec/lrc.py``'s matrix
on the same kernels): its decode uses the fewest of the units it is given (a lost unit's local
group when that is enough) and raises ``sources.Undecodable`` (a ValueError) for a set that
cannot give the wanted units. ``codec_for(policy)`` picks the right one; callers that hold a
policy never ask for RS(k, m) by hand.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Mapping, Sequence, Union

import numpy as np

from hedgefs.ec import backend_isal, lrc, sources
from hedgefs.ec.backend_numpy import NumpyKernel
from hedgefs.ec.gf256 import decode_matrix, generator_matrix
from hedgefs.ec.policy import Policy

log = logging.getLogger("hedgefs.ec")

Buffer = Union[bytes, bytearray, memoryview, np.ndarray]
BACKEND_ENV = "HEDGEFS_EC_BACKEND"
BACKENDS = ("isal", "numpy")  # in order of preference


def as_u8(buf: Buffer) -> np.ndarray:
    """A 1-D uint8 view of a buffer, without copying when the buffer is contiguous."""
    if isinstance(buf, np.ndarray):
        if buf.dtype != np.uint8:
            raise TypeError(f"expected a uint8 array, got {buf.dtype}")
        return np.ascontiguousarray(buf).reshape(-1)
    try:
        return np.frombuffer(buf, dtype=np.uint8)
    except (ValueError, BufferError):  # a non-contiguous memoryview
        return np.frombuffer(memoryview(buf).tobytes(), dtype=np.uint8)


class Codec:
    """RS(k, m) on one backend; get one from ``get_codec``. Thread-safe."""

    def __init__(self, k: int, m: int, kernel, parity_rows=None):
        self.k = k
        self.m = m
        self.backend: str = kernel.name
        self.library: str | None = kernel.library  # the libisal path, for the isal backend
        self._kernel = kernel
        self._encode_plan = kernel.prepare(parity_rows or generator_matrix(k, m))
        self._decode_plans: dict[tuple[tuple[int, ...], tuple[int, ...]], object] = {}

    def __repr__(self) -> str:
        return f"Codec(k={self.k}, m={self.m}, backend={self.backend!r})"

    def encode(
        self, data_cells: Sequence[Buffer], out: Sequence[np.ndarray] | None = None
    ) -> list[np.ndarray]:
        """The m parity cells of one stripe (or of the same byte range of its k data cells).

        A data cell may be shorter than the first (short last stripe): its missing bytes are
        zeros. Returns m uint8 arrays as long as the first data cell.

        ``out``: m writable uint8 arrays of at least that length to write the parity into (the
        result is views of them). Reusing buffers saves the page faults of fresh 1 MiB arrays,
        which cost more than ISA-L's encode itself.
        """
        if len(data_cells) != self.k:
            raise ValueError(f"need {self.k} data cells, got {len(data_cells)}")
        cells = [as_u8(c) for c in data_cells]
        length = len(cells[0])
        for unit, cell in enumerate(cells):
            if len(cell) > length:
                raise ValueError(
                    f"data cell {unit} is {len(cell)} bytes, longer than data cell 0 ({length})"
                )
        outs = None
        if out is not None:
            if len(out) != self.m or not all(
                isinstance(o, np.ndarray) and o.dtype == np.uint8 and o.ndim == 1
                and o.flags.c_contiguous and o.flags.writeable and len(o) >= length
                for o in out
            ):
                raise ValueError(
                    f"out must be {self.m} writable 1-D uint8 arrays of >= {length} bytes"
                )
            outs = [o[:length] for o in out]
        return self._kernel.apply(self._encode_plan, cells, length, outs)

    def decode(
        self, units: Mapping[int, Buffer], want: Sequence[int], length: int
    ) -> dict[int, np.ndarray]:
        """Rebuild the ``want`` units (data or parity) from at least k of the others.

        ``units`` maps unit index -> the same byte range of that unit's cell; the first k by
        index are used (so data units are preferred). A buffer shorter than ``length`` is
        zero-padded (a short cell), a longer one is cut. Returns each wanted unit's ``length``
        bytes as a new uint8 array.
        """
        n = self.k + self.m
        for unit in list(units) + list(want):
            if not 0 <= unit < n:
                raise ValueError(f"unit index {unit} out of range for RS({self.k},{self.m})")
        if length < 0:
            raise ValueError(f"length must be >= 0 (got {length})")
        if len(units) < self.k:
            raise ValueError(f"need {self.k} units, got {len(units)}")
        survivors = tuple(sorted(units)[: self.k])
        arrays = {u: as_u8(units[u])[:length] for u in survivors}
        result: dict[int, np.ndarray] = {}
        missing = []
        for unit in dict.fromkeys(want):
            if unit in units:  # nothing to rebuild, hand back a padded copy
                have = as_u8(units[unit])[:length]
                out = np.zeros(length, dtype=np.uint8)
                out[: len(have)] = have
                result[unit] = out
            else:
                missing.append(unit)
        if missing:
            key = (survivors, tuple(sorted(missing)))
            plan = self._decode_plans.get(key)
            if plan is None:
                plan = self._kernel.prepare(decode_matrix(self.k, self.m, *key))
                self._decode_plans[key] = plan  # at most C(k+m, k) * 2^m patterns
            outs = self._kernel.apply(plan, [arrays[u] for u in survivors], length)
            result.update(zip(key[1], outs))
        return {unit: result[unit] for unit in dict.fromkeys(want)}


# --- backend selection ----------------------------------------------------------------------

_lock = threading.RLock()
_isal: tuple[object, str] | None = None  # (kernel or None, library path or why not)
_codecs: dict[tuple, Codec] = {}
_announced: set[str] = set()


def _isal_kernel():
    """The ISA-L kernel, or None; loaded once, and checked against numpy before first use."""
    global _isal
    if _isal is None:
        lib, where = backend_isal.load_library()
        kernel = backend_isal.IsalKernel(lib, where) if lib is not None else None
        if kernel is not None and not _agrees_with_numpy(kernel):
            log.warning("ec: %s disagrees with the numpy codec; not using it", where)
            kernel, where = None, f"{where}: results differ from the numpy codec"
        _isal = (kernel, where)
    return _isal[0]


def _agrees_with_numpy(kernel) -> bool:
    rng = np.random.default_rng(0)
    rows = generator_matrix(6, 3) + decode_matrix(6, 3, (1, 2, 3, 6, 7, 8), (0, 4, 5))
    inputs = [rng.integers(0, 256, 97, dtype=np.uint8) for _ in range(6)]
    fast = kernel.apply(kernel.prepare(rows), inputs, 97)
    slow = NumpyKernel().apply(rows, inputs, 97)
    return all(np.array_equal(a, b) for a, b in zip(fast, slow))


def available_backends() -> list[str]:
    """Backends that work here, fastest first."""
    with _lock:
        return [name for name in BACKENDS if name == "numpy" or _isal_kernel() is not None]


def default_backend() -> str:
    """The backend ``get_codec`` uses without an explicit one (honours HEDGEFS_EC_BACKEND)."""
    forced = os.environ.get(BACKEND_ENV, "").strip().lower()
    if forced:
        return forced
    return available_backends()[0]


def _kernel(name: str):
    """The kernel of backend ``name``; ValueError for an unknown or unavailable one. Under _lock."""
    if name not in BACKENDS:
        raise ValueError(f"unknown ec backend {name!r}: expected one of {', '.join(BACKENDS)}")
    if name == "isal":
        kernel = _isal_kernel()
        if kernel is None:
            raise ValueError(f"ec backend 'isal' is not available: {_isal[1]}")
    else:
        kernel = NumpyKernel()
    if name not in _announced:
        _announced.add(name)
        log.debug("ec backend %s (%s)", name, kernel.library or "numpy lookup tables")
    return kernel


def get_codec(k: int, m: int, backend: str | None = None) -> Codec:
    """The shared RS(k, m) codec on ``backend`` (default: ``default_backend()``).

    Raises ValueError for an unknown or unavailable backend.
    """
    name = (backend or default_backend()).lower()
    with _lock:
        codec = _codecs.get((k, m, name))
        if codec is None:
            codec = _codecs[(k, m, name)] = Codec(k, m, _kernel(name))
        return codec


class LrcCodec(Codec):
    """LRC(k, l, g) (``ec/lrc.py``) on one backend; get one from ``codec_for``. Encode as RS does,
    with the local and global parity rows; decode from the cheapest subset of the given units."""

    def __init__(self, policy: Policy, kernel):
        self.policy = Policy(policy.k, policy.m, 1, local_groups=policy.local_groups)  # the shape only
        self.l, self.g = policy.local_groups, policy.global_parities
        super().__init__(policy.k, policy.m, kernel, lrc.parity_matrix(policy.k, self.l, self.g))

    def __repr__(self) -> str:
        return f"LrcCodec(k={self.k}, l={self.l}, g={self.g}, backend={self.backend!r})"

    def decode(
        self, units: Mapping[int, Buffer], want: Sequence[int], length: int
    ) -> dict[int, np.ndarray]:
        """Rebuild the ``want`` units from the fewest of ``units`` that determine them (a lost
        unit's local group when it is complete). Raises ``sources.Undecodable`` (a ValueError) when
        the given units cannot determine them; otherwise as ``Codec.decode``."""
        if length < 0:
            raise ValueError(f"length must be >= 0 (got {length})")
        chosen = sources.plan(self.policy, want, units)
        result: dict[int, np.ndarray] = {}
        for unit in want:
            if unit in units:
                have = as_u8(units[unit])[:length]
                out = np.zeros(length, dtype=np.uint8)
                out[: len(have)] = have
                result[unit] = out
        if chosen.rebuild:
            used = tuple(u for u in chosen.read)
            key = (used, chosen.rebuild)
            plan = self._decode_plans.get(key)
            if plan is None:
                rows = lrc.decode_matrix(self.k, self.l, self.g, *key)
                plan = self._decode_plans[key] = self._kernel.prepare(rows)
            outs = self._kernel.apply(plan, [as_u8(units[u])[:length] for u in used], length)
            result.update(zip(chosen.rebuild, outs))
        return {unit: result[unit] for unit in dict.fromkeys(want)}


class CopyCodec:
    """``REPLICATE-n`` behind the codec interface: one data unit and n - 1 copies of it. Encoding
    hands back the data cell itself as every "parity" cell (nothing is computed or copied: a
    writer sends the same buffer to n DataNodes); decoding hands back a copy of any unit's bytes,
    a new array as ``Codec.decode`` promises (never a view of a buffer the caller may reuse)."""

    backend = "copy"
    library = None

    def __init__(self, n: int):
        self.k, self.m = 1, n - 1

    def __repr__(self) -> str:
        return f"CopyCodec(n={self.k + self.m})"

    def encode(self, data_cells: Sequence[Buffer], out=None) -> list:
        if len(data_cells) != 1:
            raise ValueError(f"need 1 data cell, got {len(data_cells)}")
        return [data_cells[0]] * self.m

    def decode(self, units: Mapping[int, Buffer], want: Sequence[int], length: int) -> dict[int, np.ndarray]:
        n = self.k + self.m
        for unit in list(units) + list(want):
            if not 0 <= unit < n:
                raise ValueError(f"unit index {unit} out of range for REPLICATE-{n}")
        if not units:
            raise ValueError("need 1 unit, got 0")
        have = as_u8(units[min(units)])[:length]
        out = np.zeros(length, dtype=np.uint8)   # a short cell is zero-padded, as Codec.decode pads it
        out[:len(have)] = have
        return {unit: out for unit in dict.fromkeys(want)}


def codec_for(policy: Policy, backend: str | None = None) -> "Codec | LrcCodec | CopyCodec":
    """The codec of a file's own policy: RS(k, m) or LRC(k, l, g) on ``backend``, or copies for
    REPLICATE-n."""
    if policy.replicated:
        return CopyCodec(policy.units)
    if policy.local_groups:
        name = (backend or default_backend()).lower()
        key = ("lrc", policy.k, policy.local_groups, policy.global_parities, name)
        with _lock:
            codec = _codecs.get(key)
            if codec is None:
                codec = _codecs[key] = LrcCodec(policy, _kernel(name))
            return codec
    return get_codec(policy.k, policy.m, backend)
