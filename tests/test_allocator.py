"""The command line restarts itself under jemalloc where the system has it (`spacy_pairatt/allocator.py`)."""

import ctypes.util
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
from spacy_pairatt.integration.memory import HEAP_RELEASE, glibc
print(jemalloc_version() is not None, glibc() is None, HEAP_RELEASE.release(), sys.argv[1:])
"""


@needs_jemalloc
def test_the_restarted_process_runs_under_jemalloc_with_its_arguments_and_no_heap_release():
    """Under jemalloc the glibc heap release does nothing: glibc no longer allocates."""
    result = subprocess.run(
        [sys.executable, "-c", RESTART, "a b", "c"], capture_output=True, text=True, check=True, timeout=120
    )
    # the first process printed "started" and became the second, which ran the whole command again
    assert result.stdout.splitlines() == ["started", "started", "True True False ['a b', 'c']"]


@needs_jemalloc
def test_the_system_allocator_stays_when_asked_for(monkeypatch):
    monkeypatch.setenv(ALLOCATOR_VARIABLE, "system")
    result = subprocess.run([sys.executable, "-c", RESTART], capture_output=True, text=True, check=True, timeout=120)
    assert result.stdout.splitlines() == ["started", "False False True []"]
