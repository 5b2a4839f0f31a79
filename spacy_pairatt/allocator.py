"""Run the command line under jemalloc where it is installed: what keeps a long parse's memory flat.

glibc's malloc keeps the free pages of a fragmented heap: a long parse's RSS climbs with the stream,
and handing the free heap back (`integration/memory.py`) costs parse speed, since the next batches
fault the pages in again. jemalloc purges unused pages gradually and reuses the recent ones; it has
to be the process's malloc from the start, so `python -m spacy_pairatt` starts itself again with
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
from typing import List, Mapping, Optional

ALLOCATOR_VARIABLE = "SPACY_PAIRATT_ALLOCATOR"


@functools.lru_cache(maxsize=None)
def jemalloc_version() -> Optional[str]:
    """jemalloc's version where it is this process's malloc (Linux), else None."""
    if not sys.platform.startswith("linux"):
        return None
    process = ctypes.CDLL(None)
    if not hasattr(process, "mallctl"):
        return None
    version, size = ctypes.c_char_p(), ctypes.c_size_t(ctypes.sizeof(ctypes.c_char_p))
    if process.mallctl(b"version", ctypes.byref(version), ctypes.byref(size), None, ctypes.c_size_t(0)) != 0:
        return "unknown"
    return (version.value or b"unknown").decode()


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
