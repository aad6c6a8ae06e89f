"""The client's receive buffers: one pool per client (``DataNodeClient.buffers``), a read's
bytes received straight into one of them (transport.py) and given back by their one owner."""

import os


class BufferPool:
    """Receive buffers, reused: a read takes one; the one owner of what it holds gives it back
    when nothing uses its bytes any more (the reader's ``UnitRead``: see unit_reads.py).

    A buffer nobody gives back is simply garbage collected. Sizes are rounded up to 256 KiB so a
    file's unit reads share buffers; at most ``max_bytes`` are kept.

    Debug mode (``poison``, or ``HEDGEFS_POISON_BUFFERS=1``: on in every test and in ``hedgefs
    chaos``): a buffer given back is filled with a pattern, and one given back twice is an error,
    so a use after return shows up as wrong bytes (or an exception), never as luck."""

    _STEP = 256 * 1024
    POISON = 0xDB

    def __init__(self, max_bytes: int = 64 << 20, poison: bool | None = None):
        self._free: dict[int, list[bytearray]] = {}
        self._kept = 0
        self._max = max_bytes
        self.poison = os.environ.get("HEDGEFS_POISON_BUFFERS") == "1" if poison is None else poison
        self._free_ids: set[int] = set()

    def take(self, n: int) -> bytearray:
        size = max(self._STEP, -(-n // self._STEP) * self._STEP)
        free = self._free.get(size)
        if free:
            self._kept -= size
            buf = free.pop()
            self._free_ids.discard(id(buf))
            return buf
        return bytearray(size)

    def give(self, view) -> None:
        """Return the buffer behind ``view`` (a memoryview from ``DataNodeClient.read``)."""
        buf = view.obj if isinstance(view, memoryview) else view
        if not isinstance(buf, bytearray) or len(buf) % self._STEP:
            return
        if self.poison:
            if id(buf) in self._free_ids:
                raise RuntimeError("a receive buffer was given back twice")
            buf[:] = bytes([self.POISON]) * len(buf)
        if self._kept + len(buf) > self._max:
            return
        self._free.setdefault(len(buf), []).append(buf)
        self._free_ids.add(id(buf))
        self._kept += len(buf)
