"""A one-line progress bar on stderr, shown only on a terminal and only for large transfers."""

import sys
import time

SHOW_ABOVE_BYTES = 4 * 1024 * 1024


class Progress:
    def __init__(self, label: str, total: int | None, stream=None):
        self._stream = stream or sys.stderr
        self._label = label
        self._total = total
        self._done = 0
        self._start = time.monotonic()
        self._last_draw = 0.0
        self._drawn = False
        self._enabled = self._stream.isatty() and (total is None or total > SHOW_ABOVE_BYTES)

    def advance(self, n: int) -> None:
        self._done += n
        now = time.monotonic()
        # Unknown totals (stdin) show up only once they are large, like known ones.
        big = self._total is not None or self._done > SHOW_ABOVE_BYTES
        if self._enabled and big and (now - self._last_draw > 0.1 or self._done == self._total):
            self._last_draw = now
            self._draw(now)

    def finish(self) -> None:
        """Draw the last frame (the true total: a stdin of 64 MiB ends at 64 MiB, not at the last
        redraw's 60) and end the bar's line (also on failure, so an error starts a line of its own)."""
        if self._drawn:
            self._draw(time.monotonic())
            self._stream.write("\n")
            self._stream.flush()
            self._drawn = False

    def _draw(self, now: float) -> None:
        rate = self._done / max(now - self._start, 1e-6)
        if self._total:
            frac = min(1.0, self._done / self._total)
            bar = "#" * int(frac * 30)
            text = f"\r{self._label} [{bar:<30}] {frac:6.1%} {_mib(self._done)}/{_mib(self._total)} {_mib(rate)}/s"
        else:
            text = f"\r{self._label} {_mib(self._done)} {_mib(rate)}/s"
        self._stream.write(text)
        self._stream.flush()
        self._drawn = True


def _mib(n: float) -> str:
    return f"{n / 1048576:.1f} MiB"
