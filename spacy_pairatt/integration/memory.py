"""Keep a training process's resident memory flat: `[initialize.before_init]` in the training configs.

Training frees large tensors whose shapes change with every batch (activations kept for the
backward pass, gradients). glibc raises its mmap threshold each time such an array is freed, after
which big arrays come from the heap, fragment it and are never returned to the system: a MiniLM
training run grew past 14 GB and was killed. Fixing the thresholds keeps big arrays in mmap,
handed back to the system when freed.

The price is a page fault for every page of every big array, each time one is allocated: the
encoder spent a third of its time in the kernel. So only training asks for it (spaCy runs
`before_init` when a config is trained, never when a pipeline is loaded).

Parsing grows its heap the same way, more slowly: in a long stream the free part of the heap grows
while the part in use stays flat (docs/performance.md#memory). `FreeHeapRelease` bounds it once
parsing starts, under either allocator: it hands the free pages back once RSS has grown by a set
amount since the last release, looking every so many parsed words. Under glibc's malloc it also
fixes the mmap threshold at 4 MB, so the largest arrays of a batch (attention maps, the pair
scorer's chunks) are mapped and handed back when freed instead of fragmenting the heap, and
releases with malloc_trim; their pages fault in at each allocation, which is the speed this costs.
Under jemalloc (`allocator.py`) it turns jemalloc's own timed purging off, so that freed pages are
reused by the next batches without faulting, and purges at the same points instead: jemalloc's
reuse keeps the growth between releases small, so releases are rare.
"""

import ctypes
import ctypes.util
import functools
import os
import sys
import time
from typing import Callable, Dict, Optional

from spacy.language import Language
from spacy.util import registry

from ..allocator import hold_freed_pages, jemalloc_heap_usage, jemalloc_version, purge_freed_pages

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
THRESHOLD_BYTES = 128 * 1024
# Parsing: arrays from 4 MB up are mapped (glibc); look at RSS every 1,000 parsed words (reading
# /proc/self/statm) and release the free heap once RSS has grown by the allocator's amount since the
# last release. glibc's trim hands back the whole free heap, which the next batches fault in again:
# at 64 MB it released after nearly every batch. jemalloc reuses freed pages, so its releases are
# rare, but at 64 MB it still released after each batch of long sentences and at 128 MB its peak over
# a long stream climbed higher (CHANGELOG). Their cost and the growth they stop:
# results/bench_memory.json, docs/performance.md#memory.
PARSING_MMAP_THRESHOLD_BYTES = 4 * 1024 * 1024
WORDS_BETWEEN_RELEASES = 1_000
MIN_GROWTH_BYTES = {"glibc": 128 * 1024 * 1024, "jemalloc": 96 * 1024 * 1024}
# glibc's own ceiling for its rising mmap threshold (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems):
# where a long parse with glibc's defaults ends up.
GLIBC_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024

_applied = False  # glibc's thresholds fixed for training
_training_bound = False  # training asked for the bound: parsing leaves the allocator's settings alone


@functools.lru_cache(maxsize=None)
def glibc() -> Optional[ctypes.CDLL]:
    """This process's C library where glibc's malloc allocates (it has mallopt and malloc_trim), else
    None: not Linux, another C library, or jemalloc preloaded (released through `allocator.py`)."""
    if not sys.platform.startswith("linux") or jemalloc_version() is not None:
        return None
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    libc = ctypes.CDLL(libc_name)
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def limit_heap_fragmentation() -> bool:
    """Bound the heap for training, once per process: fix glibc's mmap and trim thresholds (False where
    there is no glibc). Under jemalloc its timed purging stays on: parsing's releases leave it alone."""
    global _applied, _training_bound
    _training_bound = True
    if _applied:
        return True
    libc = glibc()
    if libc is None:
        return False
    _applied = bool(libc.mallopt(M_MMAP_THRESHOLD, THRESHOLD_BYTES)) and bool(
        libc.mallopt(M_TRIM_THRESHOLD, THRESHOLD_BYTES)
    )
    return _applied


def resident_bytes() -> int:
    """This process's resident set size (Linux's /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class MallocInfo(ctypes.Structure):
    """glibc's `struct mallinfo2` (glibc 2.33 and later)."""

    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]  # fmt: skip


def heap_usage() -> Optional[Dict[str, int]]:
    """Bytes of the heap in use and free (kept by the allocator), over all arenas, and under glibc of
    mmapped chunks (None under another allocator, or glibc before 2.33): what tells live data from
    heap that the allocator keeps."""
    libc = glibc()
    if libc is None:
        return jemalloc_heap_usage()
    if not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = MallocInfo
    info = libc.mallinfo2()
    return {"in_use": info.uordblks, "free": info.fordblks, "mmapped": info.hblkhd}


class FreeHeapRelease:
    """Bounds the heap of a parsing process: hands free pages back to the system (glibc's malloc_trim,
    jemalloc's purge) when, looked at every `words_between` parsed words, the RSS has grown by more
    than `min_growth_bytes` (None: the allocator's MIN_GROWTH_BYTES) since the last release. Before the
    first words it maps arrays from `mmap_threshold_bytes` up (glibc) or turns jemalloc's timed purging
    off (`hold_freed_pages`).

    One per process (HEAP_RELEASE), since the heap is the process's: the pair-scoring components
    report the words they parse. words_between 0 turns it off. Does nothing under another allocator,
    and leaves the allocator's settings alone where training has bounded the heap
    (`limit_heap_fragmentation`, `make_training_heap_bound`).
    """

    def __init__(self, words_between: int, min_growth_bytes: Optional[int], mmap_threshold_bytes: int):
        self.words_between, self.min_growth_bytes = words_between, min_growth_bytes
        self.mmap_threshold_bytes = mmap_threshold_bytes
        self.words = 0
        self.rss_after_release = resident_bytes()
        self.started = False
        self.releases, self.seconds = 0, 0.0  # what releasing has cost, in the release calls themselves

    def parsed(self, n_words: int) -> bool:
        """Count parsed words; release the free heap when an interval is over. True when released."""
        if self.words_between <= 0:
            return False
        if not self.started:
            self.start()
        if self.min_growth_bytes is None:  # neither glibc nor jemalloc: nothing to release
            return False
        self.words += n_words
        if self.words < self.words_between:
            return False
        self.words = 0
        if resident_bytes() - self.rss_after_release <= self.min_growth_bytes:
            return False
        return self.release()

    def start(self) -> None:
        """Set the allocator up for releases: glibc's mmap threshold, or jemalloc holding freed pages; and
        the growth between releases, where not set, to the allocator's."""
        self.started = True
        if glibc() is not None:
            allocator = "glibc"
            self.set_mmap_threshold(self.mmap_threshold_bytes)
        elif jemalloc_version() is not None:
            allocator = "jemalloc"
            if not _training_bound:  # training's batches free more between evaluations: jemalloc's timer stays
                hold_freed_pages()
        else:
            return
        if self.min_growth_bytes is None:
            self.min_growth_bytes = MIN_GROWTH_BYTES[allocator]

    def set_mmap_threshold(self, size: int) -> None:
        """Map arrays of `size` bytes and more (glibc's threshold stops rising once it is set)."""
        libc = glibc()
        if libc is not None and not _applied:
            libc.mallopt(M_MMAP_THRESHOLD, size)

    def release(self) -> bool:
        libc = glibc()
        start = time.perf_counter()
        if libc is not None:
            libc.malloc_trim(0)
        elif not purge_freed_pages():
            return False
        self.seconds += time.perf_counter() - start
        self.rss_after_release = resident_bytes()
        self.releases += 1
        return True


@registry.callbacks("spacy-pairatt.training_heap_bound.v1")
def make_training_heap_bound() -> Callable[[Language], Language]:
    """Registered as `spacy-pairatt.training_heap_bound.v1`, for `[initialize.before_init]`: fixes the
    thresholds (`limit_heap_fragmentation`) in the process that trains the config."""

    def bound_heap(nlp: Language) -> Language:
        limit_heap_fragmentation()
        return nlp

    return bound_heap


HEAP_RELEASE = FreeHeapRelease(WORDS_BETWEEN_RELEASES, None, PARSING_MMAP_THRESHOLD_BYTES)
