"""The command line restarts itself under jemalloc where the system has it (`spacy_pairatt/allocator.py`)."""

import ctypes.util
import os
import subprocess
import sys

import pytest

from spacy_pairatt import allocator
from spacy_pairatt.allocator import ALLOCATOR_VARIABLE, environment_with_jemalloc

SYSTEM_JEMALLOC = ctypes.util.find_library("jemalloc") if sys.platform.startswith("linux") else None
needs_jemalloc = pytest.mark.skipif(SYSTEM_JEMALLOC is None, reason="no jemalloc installed (apt install libjemalloc2)")


@pytest.fixture
def library(tmp_path):
    path = tmp_path / "libjemalloc.so.2"
    path.write_bytes(b"")
    return str(path)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD is Linux's")
def test_a_named_library_goes_first_in_ld_preload_and_the_others_stay(library):
    environ = environment_with_jemalloc({ALLOCATOR_VARIABLE: library, "LD_PRELOAD": "libfoo.so:libbar.so", "X": "1"})
    assert environ == {ALLOCATOR_VARIABLE: library, "LD_PRELOAD": f"{library} libfoo.so libbar.so", "X": "1"}


def test_no_restart_for_the_system_allocator_or_a_library_already_preloaded(library):
    assert environment_with_jemalloc({ALLOCATOR_VARIABLE: "system"}) is None
    # LD_PRELOAD names it but it does not allocate: it failed to load, and starting again would loop
    assert environment_with_jemalloc({ALLOCATOR_VARIABLE: library, "LD_PRELOAD": library}) is None


def test_no_restart_where_jemalloc_allocates_already(library, monkeypatch):
    monkeypatch.setattr(allocator, "jemalloc_version", lambda: "5.3.0-0-g54eaed1")
    assert environment_with_jemalloc({ALLOCATOR_VARIABLE: library}) is None


def test_a_missing_library_is_named(tmp_path):
    missing = tmp_path / "nowhere" / "libjemalloc.so"
    with pytest.raises(SystemExit, match=f"{ALLOCATOR_VARIABLE}={missing}: no such file"):
        environment_with_jemalloc({ALLOCATOR_VARIABLE: str(missing)})


RESTART = """
import sys
from spacy_pairatt.allocator import jemalloc_version, restart_with_jemalloc
print("started", flush=True)
restart_with_jemalloc()
from spacy_pairatt.integration.memory import glibc
print(jemalloc_version() is not None, glibc() is None, sys.argv[1:])
"""


@needs_jemalloc
def test_the_restarted_process_runs_under_jemalloc_with_its_arguments():
    result = subprocess.run(
        [sys.executable, "-c", RESTART, "a b", "c"], capture_output=True, text=True, check=True, timeout=120
    )
    # the first process printed "started" and became the second, which ran the whole command again
    assert result.stdout.splitlines() == ["started", "started", "True True ['a b', 'c']"]


@needs_jemalloc
def test_the_system_allocator_stays_when_asked_for(monkeypatch):
    monkeypatch.setenv(ALLOCATOR_VARIABLE, "system")
    result = subprocess.run([sys.executable, "-c", RESTART], capture_output=True, text=True, check=True, timeout=120)
    assert result.stdout.splitlines() == ["started", "False False []"]


# Frees 64 MB (a run jemalloc would purge the moment it is freed) once parsing has started the release,
# then releases; prints the free bytes jemalloc holds after each step.
HOLD_AND_RELEASE = """
import sys
import numpy
from spacy_pairatt.integration import memory
if sys.argv[1] == "training":
    memory.limit_heap_fragmentation()
memory.HEAP_RELEASE.start()
array = numpy.ones(64 << 20, dtype=numpy.uint8)
del array
held = memory.heap_usage()["free"]
print(held >= 64 << 20, memory.HEAP_RELEASE.release(), memory.heap_usage()["free"])
"""


def run_under_jemalloc(script: str, *arguments: str) -> str:
    environ = {**os.environ, "LD_PRELOAD": SYSTEM_JEMALLOC, ALLOCATOR_VARIABLE: "system"}
    command = [sys.executable, "-c", script, *arguments]
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=120, env=environ).stdout


@needs_jemalloc
def test_parsing_holds_freed_pages_until_a_release_hands_them_back():
    """jemalloc's own purging faulted a parse's large arrays in again every batch (allocator.hold_freed_pages)."""
    assert run_under_jemalloc(HOLD_AND_RELEASE, "parsing").split() == ["True", "True", "0"]


@needs_jemalloc
def test_a_training_process_keeps_jemalloc_purging_on_its_own():
    """Training frees more between its evaluations than parsing between releases: jemalloc's timer stays."""
    held, released, _ = run_under_jemalloc(HOLD_AND_RELEASE, "training").split()
    assert (held, released) == ("False", "True")
