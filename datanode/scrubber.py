"""The scrubber: every unit on this DataNode re-read and verified once per interval; bad ones reported.

Cold data is never read, so latent sector errors and bit rot would pile up unseen until a group
has lost more than its parity covers. HDFS's block scanner, Ceph's scrub and MinIO's scanner exist
for that; this is ours.

One thread. A *pass* reads every unit stored when it starts, in (group, index) order, through the
store's verifying read, at most ``bandwidth_bps`` bytes per second (so it never crowds out
clients). A unit whose checksum fails is reported (``on_bad``: the NameNode marks it corrupt and
has it repaired elsewhere). The next pass starts ``interval_s`` after the previous one started, or
at once if that one took longer. Units written or deleted during a pass are the next pass's.
``status()`` is what the heartbeat carries (ScrubStatus in hedgefs.proto) and the NameNode shows
in ``hedgefs admin report``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from hedgefs.datanode.storage import READ_BATCH, BlockStore, ChecksumError, StorageError

log = logging.getLogger("hedgefs.datanode")

DEFAULT_INTERVAL_S = 7 * 24 * 3600.0
DEFAULT_BANDWIDTH_BPS = 4 * 1024 * 1024


class Scrubber:
    def __init__(self, store: BlockStore, *, interval_s: float = DEFAULT_INTERVAL_S,
                 bandwidth_bps: int = DEFAULT_BANDWIDTH_BPS,
                 on_bad: Callable[[int, int, int, str], None] = lambda g, i, generation, reason: None,
                 clock: Callable[[], float] = time.monotonic):
        self.store = store
        self.interval_s = interval_s
        self.bandwidth_bps = bandwidth_bps
        self.on_bad = on_bad
        self.clock = clock
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._next_byte_at = 0.0        # the bandwidth cap as a virtual clock
        self._status = dict(enabled=interval_s > 0, passes=0, pass_units_done=0, pass_units=0,
                            bytes_verified=0, bad_units=0, last_pass_s=0.0)

    def start(self) -> None:
        if self.interval_s <= 0:
            return
        self._thread = threading.Thread(target=self._run, name="dn-scrubber", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def status(self) -> dict:
        """ScrubStatus fields."""
        with self._lock:
            return dict(self._status)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = self.clock()
            try:
                self.run_pass()
            except Exception:   # a bug must not stop scrubbing for good
                log.exception("scrub pass failed")
            self._stop.wait(max(0.0, started + self.interval_s - self.clock()))

    def run_pass(self) -> list[tuple[int, int, int]]:
        """Verify every unit stored now; returns the bad ones (each already reported)."""
        units = sorted(self.store.units())
        started = self.clock()
        with self._lock:
            self._status.update(pass_units_done=0, pass_units=len(units))
        bad = []
        for g, i, generation, length in units:
            if self._stop.is_set():
                return bad
            if not self._verify(g, i, generation, length):
                bad.append((g, i, generation))
            with self._lock:
                self._status["pass_units_done"] += 1
        with self._lock:
            self._status["passes"] += 1
            self._status["last_pass_s"] = self.clock() - started
        if bad:
            log.warning("scrub pass: %d of %d units are bad: %s", len(bad), len(units),
                        ", ".join(f"{g}/{i}" for g, i, _ in bad[:20]))
        return bad

    def _verify(self, g: int, i: int, generation: int, length: int) -> bool:
        """Read the whole unit, paced; False (and reported) if a checksum fails."""
        try:
            for piece in self.store.read(g, i, 0, length, generation=generation, piece=READ_BATCH):
                with self._lock:
                    self._status["bytes_verified"] += len(piece)
                if self._pace(len(piece)):
                    return True     # stopping
        except ChecksumError as e:
            log.warning("scrub: %s", e)
            with self._lock:
                self._status["bad_units"] += 1
            self.on_bad(g, i, generation, f"scrub: {e}")
            return False
        except (StorageError, OSError):
            pass    # deleted or replaced since the pass began: the next pass sees the new state
        return True

    def _pace(self, nbytes: int) -> bool:
        """Wait until ``nbytes`` more fit under the bandwidth cap; True if stopping."""
        if self.bandwidth_bps <= 0:
            return self._stop.is_set()
        now = self.clock()
        self._next_byte_at = max(self._next_byte_at, now) + nbytes / self.bandwidth_bps
        return self._stop.wait(max(0.0, self._next_byte_at - now))
