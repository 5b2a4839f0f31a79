"""Keep a training process's resident memory flat: `[initialize.before_init]` in the training configs.

Training frees large tensors whose shapes change with every batch (activations kept for the
backward pass, gradients). glibc raises its mmap threshold each time such an array is freed, after
which big arrays come from the heap, fragment it and are never returned to the system: a MiniLM
training run grew past 14 GB and was killed. Fixing the thresholds keeps big arrays in mmap,
handed back to the system when freed.

The price is a page fault for every page of every big array, each time one is allocated: the
encoder spent a third of its time in the kernel. So only training asks for it (spaCy runs
`before_init` when a config is trained, never when a pipeline is loaded); parsing keeps glibc's
own thresholds.
"""

import ctypes
import ctypes.util
import sys
from typing import Callable

from spacy.language import Language

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


def make_training_heap_bound() -> Callable[[Language], Language]:
    """Registered as `spacy-pairatt.training_heap_bound.v1`, for `[initialize.before_init]`: fixes the
    thresholds (`limit_heap_fragmentation`) in the process that trains the config."""

    def bound_heap(nlp: Language) -> Language:
        limit_heap_fragmentation()
        return nlp

    return bound_heap
