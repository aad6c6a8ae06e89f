"""Codec throughput per backend, one core: encode, rebuild 1 lost data cell, rebuild 3.

MB/s counts data bytes (k * cell_size per stripe) and MB = 10^6 bytes. The same stripe is coded
over and over, so it is cache-warm: these are the codec's ceilings, not end-to-end figures. With
ISA-L and 1 MiB cells, faulting in fresh result arrays costs more than the coding, and glibc's
heap trimming decides how often that happens; hence encode_reuse_mb_s.

    python -m hedgefs.bench.codec [--cell-size BYTES] [--k K] [--m M] [--seconds S] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from hedgefs.ec.codec import available_backends, get_codec


def _rate(fn, data_bytes: int, seconds: float) -> float:
    fn()  # warm up: tables, decode plans, page faults
    count, start = 0, time.perf_counter()
    while True:
        fn()
        count += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds and count >= 3:
            return data_bytes * count / elapsed / 1e6


def run_codec_bench(
    cell_size: int = 1 << 20, k: int = 6, m: int = 3, seconds: float = 1.0
) -> list[dict]:
    """One dict per available backend: backend, encode_mb_s, decode1_mb_s, decode3_mb_s
    (each call returns fresh arrays, as callers use the codec) and encode_reuse_mb_s (parity
    written into the same buffers every time: no page faults for new memory)."""
    rng = np.random.default_rng(0)
    data = [rng.integers(0, 256, cell_size, dtype=np.uint8) for _ in range(k)]
    lost = min(3, m)
    results = []
    for backend in available_backends():
        codec = get_codec(k, m, backend)
        parity = codec.encode(data)
        units = dict(enumerate(data + parity))
        one_lost = {u: b for u, b in units.items() if u != 0}
        many_lost = {u: b for u, b in units.items() if u >= lost}
        stripe = k * cell_size
        reuse = [np.empty(cell_size, dtype=np.uint8) for _ in range(m)]
        results.append({
            "backend": backend,
            "k": k,
            "m": m,
            "cell_size": cell_size,
            "encode_mb_s": round(_rate(lambda: codec.encode(data), stripe, seconds), 1),
            "encode_reuse_mb_s": round(
                _rate(lambda: codec.encode(data, out=reuse), stripe, seconds), 1),
            "decode1_mb_s": round(
                _rate(lambda: codec.decode(one_lost, [0], cell_size), stripe, seconds), 1),
            "decode3_mb_s": round(
                _rate(lambda: codec.decode(many_lost, list(range(lost)), cell_size), stripe,
                      seconds), 1),
        })
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="RS codec throughput per backend (one core)")
    parser.add_argument("--cell-size", type=int, default=1 << 20)
    parser.add_argument("--k", type=int, default=6)
    parser.add_argument("--m", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    parser.add_argument("--json", action="store_true", help="one JSON object per backend")
    args = parser.parse_args(argv)
    rows = run_codec_bench(args.cell_size, args.k, args.m, args.seconds)
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return
    print(f"RS({args.k},{args.m}), {args.cell_size} B cells, MB/s of data (10^6 B)")
    print(f"{'backend':<8} {'encode':>10} {'enc-reuse':>10} {'decode-1':>10} {'decode-3':>10}")
    for row in rows:
        print(f"{row['backend']:<8} {row['encode_mb_s']:>10.1f} {row['encode_reuse_mb_s']:>10.1f} "
              f"{row['decode1_mb_s']:>10.1f} {row['decode3_mb_s']:>10.1f}")


if __name__ == "__main__":
    main()
