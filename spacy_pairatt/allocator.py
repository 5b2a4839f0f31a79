"""Run the command line under jemalloc where it is installed: what keeps a long parse's memory flat.

glibc's malloc keeps the free pages of a fragmented heap: a long parse's RSS climbs with the stream,
and handing the free heap back (`integration/memory.py`) costs parse speed, since the next batches
fault the pages in again. jemalloc reuses freed pages across size classes, and lets a caller say when
unused pages go back to the system (`hold_freed_pages`, `purge_freed_pages`); it has to be the
process's malloc from the start, so `python -m spacy_pairatt` starts itself again with
jemalloc preloaded (LD_PRELOAD) where the system has it (`apt install libjemalloc2`, `dnf install
jemalloc`, conda-forge's `jemalloc`). Figures: docs/performance.md#memory.

SPACY_PAIRATT_ALLOCATOR chooses: unset or "jemalloc", jemalloc where found; "system", the C
library's malloc; a path, that jemalloc library. Linux only. A process of your own (a server
calling `spacy.load`) gets the same by starting under `LD_PRELOAD=libjemalloc.so.2`.

Imports neither spaCy nor torch: it runs before the command line imports them.
"""

import ctypes
import ctypes.util
import functools
import os
import platform
import sys
from typing import Callable, Dict, List, Mapping, Optional

ALLOCATOR_VARIABLE = "SPACY_PAIRATT_ALLOCATOR"


# jemalloc's arena index that stands for all arenas (MALLCTL_ARENAS_ALL)
ALL_ARENAS = 4096


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


def purge_freed_pages() -> bool:
    """Hand every arena's unused pages back to the system; False without jemalloc."""
    return write_setting(f"arena.{ALL_ARENAS}.purge")


def allocator_name() -> str:
    """This process's malloc as results record it: "jemalloc 5.3.0", "glibc" or "system" (another C library)."""
    version = jemalloc_version()
    if version is not None:
        return f"jemalloc {version.split('-')[0]}"
    return "glibc" if platform.libc_ver()[0] == "glibc" else "system"


def preloaded(environ: Mapping[str, str]) -> List[str]:
    """The libraries LD_PRELOAD names (separated by spaces or colons)."""
    return environ.get("LD_PRELOAD", "").replace(":", " ").split()


def preloading(environ: Mapping[str, str], libraries: List[str]) -> dict:
    """`environ` with LD_PRELOAD naming `libraries`, in that order."""
    return {**environ, "LD_PRELOAD": " ".join(libraries)}


def jemalloc_library(environ: Mapping[str, str]) -> Optional[str]:
    """The jemalloc library SPACY_PAIRATT_ALLOCATOR asks for: a path, or the system's (None: "system",
    not Linux, or none installed)."""
    choice = environ.get(ALLOCATOR_VARIABLE, "jemalloc")
    if choice == "system" or not sys.platform.startswith("linux"):
        return None
    if choice != "jemalloc":
        if not os.path.isfile(choice):
            raise SystemExit(
                f'{ALLOCATOR_VARIABLE}={choice}: no such file (a path to libjemalloc.so, "jemalloc" or "system")'
            )
        return choice
    return ctypes.util.find_library("jemalloc")


def environment_with_jemalloc(environ: Mapping[str, str]) -> Optional[dict]:
    """`environ` with jemalloc first in LD_PRELOAD, or None where the process needs no restart: jemalloc
    already allocates, none is asked for or found, or LD_PRELOAD names it already (it failed to load:
    the loader said why, and starting again would loop)."""
    if jemalloc_version() is not None:
        return None
    library, libraries = jemalloc_library(environ), preloaded(environ)
    if library is None or library in libraries:
        return None
    return preloading(environ, [library, *libraries])


def restart_with_jemalloc() -> None:
    """Replace this process by the same command under jemalloc (`environment_with_jemalloc`), if needed."""
    environ = environment_with_jemalloc(os.environ)
    if environ is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, sys.orig_argv, environ)
