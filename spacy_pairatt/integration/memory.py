"""Bounded memory, asked for: the allocator settings a long run may choose. Nothing here runs unless
asked; loading or running a pipeline leaves the process's allocator as it found it.

Training (`spacy-pairatt.training_heap_bound.v1`, `[initialize.before_init]` in the training configs)
frees large tensors whose shapes change with every batch. glibc raises its mmap threshold each time
such an array is freed, after which big arrays come from the heap, fragment it and are never returned
to the system: a MiniLM training run grew past 14 GB and was killed. Fixing the thresholds keeps big
arrays in mmap, handed back when freed, at the price of a page fault for every page of every big array.

Parsing a long stream grows the free part of the heap while the part in use stays flat
(docs/performance.md#memory). `ParsingHeapBound` bounds it for a user who opts in
(`spacy-pairatt.bounded_memory.v1` for `[nlp] after_pipeline_creation`, the `pairatt_bounded_memory`
pipe, `parse --bounded-memory`): it hands the free pages back once RSS has grown by a set amount,
looking every so many parsed words. Under glibc's malloc it also fixes the mmap threshold at 4 MB, so
the largest arrays of a batch are mapped and handed back when freed; their pages fault in at each
allocation, which is the speed this costs. Under jemalloc it turns jemalloc's own timed purging off,
so that freed pages are reused by the next batches without faulting, and purges at the same points
instead. jemalloc has to be the process's malloc from its start: `parse --bounded-memory` starts
itself again with it preloaded where the system has one (`restart_with_jemalloc`).

SPACY_PAIRATT_ALLOCATOR chooses for that restart: unset, empty or "jemalloc", jemalloc where found;
"system", the C library's malloc; a path, that jemalloc library. Linux only.

The registered functions that set these bounds live with what they serve: the training callback in
`training/callbacks.py`, the pipe and its callback in `components/bounded_memory.py`.
"""

import ctypes
import ctypes.util
import functools
import os
import platform
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence

ALLOCATOR_VARIABLE = "SPACY_PAIRATT_ALLOCATOR"
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
TRAINING_THRESHOLD_BYTES = 128 * 1024
# Parsing, opted in: arrays from 4 MB up are mapped (glibc); look at RSS every 1,000 parsed words and
# hand the free heap back once RSS has grown by the allocator's amount since the last time. glibc's
# trim hands back the whole free heap, which the next batches fault in again: at 64 MB it did so after
# nearly every batch. jemalloc reuses freed pages, so at 96 MB its returns are rare (CHANGELOG).
# Their cost and the growth they stop: results/bench_memory.json, docs/performance.md#memory.
PARSING_MMAP_THRESHOLD_BYTES = 4 * 1024 * 1024
WORDS_BETWEEN_CHECKS = 1_000
MIN_GROWTH_BYTES = {"glibc": 128 * 1024 * 1024, "jemalloc": 96 * 1024 * 1024}
# glibc's own ceiling for its rising mmap threshold (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems):
# where a long parse with glibc's defaults ends up.
GLIBC_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024
# jemalloc's arena index that stands for all arenas (MALLCTL_ARENAS_ALL)
ALL_ARENAS = 4096
ELF_MAGIC = b"\x7fELF"

_training_process = False  # this process trains: under jemalloc its own timed purging stays on
_training_thresholds_set = False  # training fixed glibc's thresholds: parsing leaves them as they are
_newest_bound: Optional["ParsingHeapBound"] = None  # the newest pairatt_bounded_memory pipe's


# --- jemalloc: its control function, where it is this process's malloc --------------------------------


@functools.lru_cache(maxsize=None)
def mallctl() -> Optional[Callable[..., int]]:
    """jemalloc's control function where jemalloc is this process's malloc (Linux), else None."""
    if not sys.platform.startswith("linux"):
        return None
    return getattr(ctypes.CDLL(None), "mallctl", None)


def read_setting(name: str, kind: type) -> Optional[object]:
    """jemalloc's setting `name` read as the ctypes `kind`; None without jemalloc or where it has none."""
    control = mallctl()
    if control is None:
        return None
    value, size = kind(), ctypes.c_size_t(ctypes.sizeof(kind))
    if control(name.encode(), ctypes.byref(value), ctypes.byref(size), None, ctypes.c_size_t(0)) != 0:
        return None
    return value.value


def write_setting(name: str, value: Optional[ctypes._SimpleCData] = None) -> bool:
    """Write `value` to jemalloc's setting `name` (no value: run the action `name`); True where it took."""
    control = mallctl()
    if control is None:
        return False
    if value is None:
        return control(name.encode(), None, None, None, ctypes.c_size_t(0)) == 0
    return control(name.encode(), None, None, ctypes.byref(value), ctypes.c_size_t(ctypes.sizeof(value))) == 0


@functools.lru_cache(maxsize=None)
def jemalloc_version() -> Optional[str]:
    """jemalloc's version where it is this process's malloc (Linux), else None."""
    if mallctl() is None:
        return None
    version = read_setting("version", ctypes.c_char_p)
    return "unknown" if version is None else version.decode()


def hold_freed_pages() -> bool:
    """Keep the pages jemalloc frees until `purge_freed_pages`, in every arena and in those made later.

    jemalloc hands freed pages back on a timer (its decay) and, for any free run of 8 MB or more, the
    moment it is freed; a parse frees attention maps and pair chunks of a new size every batch, so
    the next batch faulted the same pages in again (page faults per word: CHANGELOG). Turning decay
    off for every arena stops both, and leaves the handing back to the caller. False without jemalloc.
    """
    if mallctl() is None:
        return False
    never, arenas = ctypes.c_ssize_t(-1), read_setting("arenas.narenas", ctypes.c_uint) or 0
    for kind in ("dirty", "muzzy"):
        write_setting(f"arenas.{kind}_decay_ms", never)  # arenas jemalloc makes from now on
        for arena in range(arenas):
            write_setting(f"arena.{arena}.{kind}_decay_ms", never)  # fails for those not made yet: fine
    return read_setting("arena.0.dirty_decay_ms", ctypes.c_ssize_t) == -1


def purge_freed_pages() -> bool:
    """Hand every arena's unused pages back to the system; False without jemalloc."""
    return write_setting(f"arena.{ALL_ARENAS}.purge")


def jemalloc_heap_usage() -> Optional[Dict[str, int]]:
    """Bytes jemalloc has handed out (in use) and holds free (unused pages not yet handed back); None
    without jemalloc or its statistics."""
    if not write_setting("epoch", ctypes.c_uint64(1)):  # statistics are refreshed per epoch
        return None
    page = read_setting("arenas.page", ctypes.c_size_t)
    usage = {"in_use": read_setting("stats.allocated", ctypes.c_size_t)}
    for kind in ("dirty", "muzzy"):
        usage[kind] = read_setting(f"stats.arenas.{ALL_ARENAS}.p{kind}", ctypes.c_size_t)
    if page is None or None in usage.values():
        return None
    return {"in_use": usage["in_use"], "free": (usage["dirty"] + usage["muzzy"]) * page}


# --- glibc ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def glibc() -> Optional[ctypes.CDLL]:
    """This process's C library where glibc's malloc allocates (it has mallopt and malloc_trim), else
    None: not Linux, another C library, or jemalloc preloaded."""
    if not sys.platform.startswith("linux") or jemalloc_version() is not None:
        return None
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    libc = ctypes.CDLL(libc_name)
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


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


def allocator_name() -> str:
    """This process's malloc as results record it: "jemalloc 5.3.0", "glibc" or "system" (another C library)."""
    version = jemalloc_version()
    if version is not None:
        return f"jemalloc {version.split('-')[0]}"
    return "glibc" if platform.libc_ver()[0] == "glibc" else "system"


def resident_bytes() -> int:
    """This process's resident set size (Linux's /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


# --- training: the opt-in `before_init` callback --------------------------------------------------------


def limit_heap_fragmentation() -> bool:
    """Bound the heap for training, once per process: fix glibc's mmap and trim thresholds (False where
    there is no glibc). Under jemalloc its timed purging stays on."""
    global _training_process, _training_thresholds_set
    _training_process = True
    if _training_thresholds_set:
        return True
    libc = glibc()
    if libc is None:
        return False
    _training_thresholds_set = bool(libc.mallopt(M_MMAP_THRESHOLD, TRAINING_THRESHOLD_BYTES)) and bool(
        libc.mallopt(M_TRIM_THRESHOLD, TRAINING_THRESHOLD_BYTES)
    )
    return _training_thresholds_set


# --- parsing: the opt-in heap bound ---------------------------------------------------------------------


class ParsingHeapBound:
    """Bounds the heap of a parsing process: hands free pages back to the system (glibc's malloc_trim,
    jemalloc's purge) when, looked at every `words_between_checks` parsed words, the RSS has grown by
    more than `min_growth_bytes` (None: the allocator's MIN_GROWTH_BYTES) since the last time. At the
    first words it maps arrays from PARSING_MMAP_THRESHOLD_BYTES up (glibc) or holds jemalloc's freed
    pages (`hold_freed_pages`), unless training has bounded the heap. Does nothing under another allocator.

    One per `pairatt_bounded_memory` pipe, with that pipe's settings and its count of words: two
    pipelines in a process each hand the process's free heap back by their own settings.
    """

    def __init__(self, words_between_checks: int = WORDS_BETWEEN_CHECKS, min_growth_bytes: Optional[int] = None):
        self.words_between_checks, self.min_growth_bytes = words_between_checks, min_growth_bytes
        self.words = 0
        self.rss_after_return = resident_bytes()
        self.started = False
        self.returns, self.seconds = 0, 0.0  # what handing pages back has cost, in those calls themselves

    def parsed(self, n_words: int) -> bool:
        """Count parsed words; hand the free heap back when an interval is over. True when it did."""
        if not self.started:
            self.start()
        if self.min_growth_bytes is None:  # neither glibc nor jemalloc: nothing to hand back
            return False
        self.words += n_words
        if self.words < self.words_between_checks:
            return False
        self.words = 0
        if resident_bytes() - self.rss_after_return <= self.min_growth_bytes:
            return False
        return self.return_free_pages()

    def start(self) -> None:
        """Set the allocator up: glibc's mmap threshold, or jemalloc holding freed pages; and the growth
        between returns, where not set, to the allocator's."""
        self.started = True
        if glibc() is not None:
            allocator = "glibc"
            set_mmap_threshold(PARSING_MMAP_THRESHOLD_BYTES)
        elif jemalloc_version() is not None:
            allocator = "jemalloc"
            if not _training_process:  # training frees more between evaluations: jemalloc's timer stays
                hold_freed_pages()
        else:
            return
        if self.min_growth_bytes is None:
            self.min_growth_bytes = MIN_GROWTH_BYTES[allocator]

    def return_free_pages(self) -> bool:
        libc = glibc()
        start = time.perf_counter()
        if libc is not None:
            libc.malloc_trim(0)
        elif not purge_freed_pages():
            return False
        self.seconds += time.perf_counter() - start
        self.rss_after_return = resident_bytes()
        self.returns += 1
        return True


def set_mmap_threshold(size: int) -> None:
    """Map arrays of `size` bytes and more (glibc's threshold stops rising once it is set), unless
    training fixed the thresholds."""
    libc = glibc()
    if libc is not None and not _training_thresholds_set:
        libc.mallopt(M_MMAP_THRESHOLD, size)


def parsing_heap_bound() -> ParsingHeapBound:
    """The bound of the newest `pairatt_bounded_memory` pipe made in this process (one with the default
    settings before any): where a process with one bounded pipeline reads its returns."""
    global _newest_bound
    if _newest_bound is None:
        _newest_bound = ParsingHeapBound()
    return _newest_bound


def new_parsing_heap_bound(words_between_checks: int, min_growth_bytes: Optional[int]) -> ParsingHeapBound:
    """A bound for a new `pairatt_bounded_memory` pipe, which `parsing_heap_bound` answers from now on."""
    global _newest_bound
    _newest_bound = ParsingHeapBound(words_between_checks, min_growth_bytes)
    return _newest_bound


# --- jemalloc for a command of its own: the restart -------------------------------------------------------


def preloaded(environ: Mapping[str, str]) -> List[str]:
    """The libraries LD_PRELOAD names (separated by spaces or colons)."""
    return environ.get("LD_PRELOAD", "").replace(":", " ").split()


def preloading(environ: Mapping[str, str], libraries: List[str]) -> dict:
    """`environ` with LD_PRELOAD naming `libraries`, in that order."""
    return {**environ, "LD_PRELOAD": " ".join(libraries)}


def jemalloc_library(environ: Mapping[str, str]) -> Optional[str]:
    """The jemalloc library SPACY_PAIRATT_ALLOCATOR asks for: a path, or the system's (None: "system",
    not Linux, or none installed). A path LD_PRELOAD cannot name (a space or a colon) or a file that is
    not a shared library is refused in one line."""
    choice = environ.get(ALLOCATOR_VARIABLE) or "jemalloc"
    if choice == "system" or not sys.platform.startswith("linux"):
        return None
    if choice == "jemalloc":
        return ctypes.util.find_library("jemalloc")
    problem = None
    if any(separator in choice for separator in " :\t\n"):
        problem = "LD_PRELOAD cannot name a path with a space or a colon"
    elif not os.path.isfile(choice):
        problem = "no such file"
    else:
        with open(choice, "rb") as library:
            if library.read(4) != ELF_MAGIC:
                problem = "not a shared library"
    if problem is not None:
        raise SystemExit(f'{ALLOCATOR_VARIABLE}={choice}: {problem} (a path to libjemalloc.so, "jemalloc" or "system")')
    return choice


def environment_with_jemalloc(environ: Mapping[str, str]) -> Optional[dict]:
    """`environ` with jemalloc first in LD_PRELOAD, or None where a restart would not help: jemalloc
    already allocates, none is asked for or found, or LD_PRELOAD names it already (it failed to load:
    the loader said why, and starting again would loop)."""
    if jemalloc_version() is not None:
        return None
    library, libraries = jemalloc_library(environ), preloaded(environ)
    if library is None or library in libraries:
        return None
    return preloading(environ, [library, *libraries])


def command_line_start() -> Optional[List[str]]:
    """`python [OPTIONS] -m spacy_pairatt` as this process was started, its interpreter options kept
    (-u, -X ..., -W ...), where this process is that command line itself; None otherwise (a script
    that runs the command line in-process, which keeps its process)."""
    started, arguments = list(getattr(sys, "orig_argv", [])), sys.argv[1:]
    start = started[: len(started) - len(arguments)]
    main = Path(sys.argv[0]) if sys.argv else Path()
    if started[len(start) :] != arguments or (main.parent.name, main.name) != ("spacy_pairatt", "__main__.py"):
        return None
    return start if len(start) > 1 and start[-1].endswith("spacy_pairatt") else None


def restart_with_jemalloc(arguments: Sequence[str]) -> None:
    """Replace this process by `python [OPTIONS] -m spacy_pairatt ARGUMENTS` under jemalloc, where this
    process is that command line and a restart would give it jemalloc (`environment_with_jemalloc`)."""
    start = command_line_start()
    if start is None:
        return
    environ = environment_with_jemalloc(os.environ)
    if environ is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, *start[1:], *arguments], environ)
