"""Keep MiB-sized buffers in the heap instead of mmapping (and page-faulting) each one afresh.

Cells are 64 KiB-4 MiB and every stripe allocates a dozen of them. glibc serves such sizes with
mmap by default and gives them back on free, so each new buffer costs ~256 page faults per MiB
and zero-filling, which we measured at more than the ISA-L coding itself (and ~30% of `put`).
Raising the mmap threshold (to 4 MiB: cells and messages come from the heap, 8 MiB read
chunks are still mapped) and the trim threshold (32 MiB kept: peak RSS of a 1 GiB get stays
under 200 MB) lets freed cells be reused. Process-wide, so it is called by the CLI entry point
(clients and servers), never on import.
"""

import ctypes

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def tune_malloc(mmap_threshold: int = 4 << 20, trim_threshold: int = 32 << 20) -> bool:
    """True if glibc accepted the settings; False (and no harm) elsewhere."""
    try:
        # The process's own symbols: libc is loaded already. (ctypes.util.find_library("c")
        # would run ldconfig in a child process: milliseconds of every command's start-up.)
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mmap_ok = bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold))
    trim_ok = bool(mallopt(_M_TRIM_THRESHOLD, trim_threshold))
    return mmap_ok and trim_ok
