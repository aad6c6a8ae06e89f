"""The client process's own garbage collector during a bench run: a stall the canary cannot see.

    watch = gcwatch.GcWatch().start()     # before the run's clock starts (its collect is not the run's)
    ...                                   # the run's reads
    watch.stop()
    watch.pauses                          # [(t_s monotonic, ms, generation)], each >= RECORD_MS
    watch.summary()                       # {"collections", "total_ms", "max_ms", "pauses"}

The bench's client and its load generator share one process, and the process keeps what the
suite has measured so far (every run's records, histograms, traces) until it writes the JSON.
CPython runs a full (generation 2) collection whenever the long-lived heap has grown by a
quarter since the last one, and a full collection walks every tracked object with the GIL held:
in a 1-minute quick suite, 17 of them paused the client for up to 85 ms each, in the middle of
its reads (measured 2026-12-01 with ``gc.callbacks``). A read path measured that way is charged
for the bench's bookkeeping: the healthy runs' p99.9 grew from 31 ms in the suite's first run to
120-230 ms twenty minutes later, on a quiet host with a quiet canary.

``start`` does what a long-lived Python service does after start-up (``gc.freeze()``, as
Instagram's and the CPython documentation's advice goes): it collects once before the run, then
freezes everything alive into the permanent generation, so the run's collections walk only what
the run itself allocates (the client's reads and the run's own records); ``stop`` unfreezes after
the run (the next run's ``collect`` reclaims what died). Collections still happen, and every one of
``RECORD_MS`` or more is recorded with its time, so a run's slow reads can be set beside them.
"""

from __future__ import annotations

import gc
import time

RECORD_MS = 2.0   # collections shorter than this are not listed (counted, though)


class GcWatch:
    def __init__(self):
        self.collections = 0
        self.total_ms = 0.0
        self.pauses: list[tuple[float, float, int]] = []
        self._began = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        took = (time.perf_counter() - self._began) * 1000.0
        self.collections += 1
        self.total_ms += took
        if took >= RECORD_MS:
            self.pauses.append((round(time.monotonic(), 4), round(took, 2), info["generation"]))

    def start(self) -> "GcWatch":
        """Collect, freeze what is alive, and watch the collections from now on."""
        gc.collect()
        gc.freeze()
        gc.callbacks.append(self._callback)
        return self

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)
            gc.unfreeze()

    def summary(self) -> dict:
        return {"collections": self.collections, "total_ms": round(self.total_ms, 1),
                "max_ms": max((ms for _, ms, _ in self.pauses), default=0.0), "pauses": list(self.pauses)}
