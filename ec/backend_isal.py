"""The ISA-L backend: Intel's SIMD erasure-code kernels through ctypes.

ISA-L works in GF(2^8) with polynomial 0x11d, as reedsolo does, so feeding it our own matrix
rows (``ec_init_tables``) gives byte-identical results; ``ec_encode_data`` then computes
rows x inputs for encode and decode alike. ctypes drops the GIL around the call, so threads
encode and decode in parallel.

The library is looked up as a system ``libisal`` first, then as the copy bundled in pyeclib's
wheel (``pyeclib.libs/libisal*.so*``); pyeclib's own C module is never imported.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os
from typing import Sequence

import numpy as np

from hedgefs.ec.gf256 import Matrix


def candidate_paths() -> list[str]:
    paths = []
    found = ctypes.util.find_library("isal")
    if found:
        paths.append(found)
    paths.append("libisal.so.2")
    try:
        spec = importlib.util.find_spec("pyeclib")  # locates the package without importing it
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            site_packages = os.path.dirname(os.path.abspath(location))
            paths.extend(sorted(glob.glob(os.path.join(site_packages, "pyeclib.libs", "libisal*.so*"))))
    return list(dict.fromkeys(paths))


def load_library() -> tuple[ctypes.CDLL, str] | tuple[None, str]:
    """The first loadable libisal with the two entry points, and its path; else (None, why)."""
    errors = []
    for path in candidate_paths():
        try:
            lib = ctypes.CDLL(path)
            init_tables, encode = lib.ec_init_tables, lib.ec_encode_data
        except (OSError, AttributeError) as exc:
            errors.append(f"{path}: {exc}")
            continue
        init_tables.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        init_tables.restype = None
        encode.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                           ctypes.c_void_p, ctypes.c_void_p]
        encode.restype = None
        return lib, path
    return None, "; ".join(errors) or "no libisal found"


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


class IsalKernel:
    name = "isal"

    def __init__(self, lib: ctypes.CDLL, path: str):
        self._lib = lib
        self.library = path

    def prepare(self, rows: Matrix) -> tuple[Matrix, ctypes.Array]:
        r, k = len(rows), len(rows[0]) if rows else 0
        matrix = (ctypes.c_ubyte * max(1, r * k))(*[c for row in rows for c in row])
        tables = (ctypes.c_ubyte * max(1, 32 * k * r))()
        if r:
            self._lib.ec_init_tables(k, r, matrix, tables)
        return rows, tables

    def apply(
        self,
        prepared: tuple[Matrix, ctypes.Array],
        inputs: Sequence[np.ndarray],
        length: int,
        outs: list[np.ndarray] | None = None,
    ) -> list[np.ndarray]:
        rows, tables = prepared
        if outs is None:
            outs = [np.empty(length, dtype=np.uint8) for _ in rows]
        if length == 0 or not rows:
            return outs
        full = []
        for a in inputs:
            if len(a) < length:  # ISA-L reads `length` bytes of every input: zero-pad short cells
                padded = np.zeros(length, dtype=np.uint8)
                padded[: len(a)] = a
                a = padded
            full.append(a)
        data = (ctypes.c_void_p * len(full))(*[_address(a) for a in full])
        coding = (ctypes.c_void_p * len(outs))(*[_address(o) for o in outs])
        self._lib.ec_encode_data(length, len(full), len(outs), tables, data, coding)
        return outs
