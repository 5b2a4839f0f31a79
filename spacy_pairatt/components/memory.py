"""Keep a long training or parsing process's resident memory flat.

The pair features are large arrays whose shapes change with every batch. glibc raises its mmap
threshold each time such an array is freed, after which big arrays come from the heap, fragment
it and are never returned to the system: a MiniLM training run grew past 14 GB and was killed.
Fixing the thresholds keeps big arrays in mmap, handed back to the system when freed.
"""

import ctypes
import ctypes.util
import sys

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
THRESHOLD_BYTES = 128 * 1024

_applied = False


def limit_heap_fragmentation() -> bool:
    """Fix glibc's mmap and trim thresholds once per process; False where there is no glibc."""
    global _applied
    if _applied:
        return True
    if not sys.platform.startswith("linux"):
        return False
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    libc = ctypes.CDLL(libc_name)
    if not hasattr(libc, "mallopt"):
        return False
    _applied = bool(libc.mallopt(M_MMAP_THRESHOLD, THRESHOLD_BYTES)) and bool(
        libc.mallopt(M_TRIM_THRESHOLD, THRESHOLD_BYTES)
    )
    return _applied
