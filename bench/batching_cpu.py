"""CPU a coalesced operation costs in the client's Batcher (client/batching.py), alone: a probe.

    python bench/batching_cpu.py LABEL [ITEMS]

16 threads each call ``Batcher.call`` ITEMS times in all (40,000 by default) over a ``send`` that
waits 0.5 ms (an RPC's wait, no CPU) and answers every item: this process's CPU an item (the
batcher's hand-offs and wake-ups, and the thread pool's), items/s, batches and their mean size.
Runs whichever build's client is first on sys.path: a baseline's through ``PYTHONPATH`` of its shim
(a directory holding ``hedgefs`` -> the baseline's checkout), from a directory that is not a
checkout's root. Alternate the builds A B B A under the heavy lock.
"""

import concurrent.futures
import resource
import sys
import time

from hedgefs.client.batching import Batcher


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(label: str, items: int) -> None:
    def send(batch):
        time.sleep(0.0005)
        return list(batch)

    batcher = Batcher(send, max_batch=256, max_in_flight=2)
    cpu, began = _cpu(), time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        for _ in pool.map(batcher.call, range(items)):
            pass
    cpu, wall = _cpu() - cpu, time.perf_counter() - began
    print(f"{label}: {items / wall:,.0f} items/s, {cpu / items * 1e6:.1f} us CPU an item, "
          f"{batcher.batches} batches of {batcher.items / batcher.batches:.1f} on average")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40_000)
