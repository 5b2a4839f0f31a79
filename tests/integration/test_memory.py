"""Bounded memory is the user's choice (`integration/memory.py`): a default pipeline leaves the
process's allocator and environment as they were; the opt-in pipe, callback and `parse --bounded-memory`
hand free heap back under glibc or jemalloc; results/bench_memory.json measures what that buys."""

import ctypes
import ctypes.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import spacy

from spacy_pairatt.integration import memory
from spacy_pairatt.integration.memory import (
    ALLOCATOR_VARIABLE,
    ParsingHeapBound,
    environment_with_jemalloc,
    glibc,
    jemalloc_library,
    resident_bytes,
)
from tests.conftest import UD_DIR, examples_from_docs, make_pipeline

ROOT = Path(__file__).resolve().parents[2]
SYSTEM_JEMALLOC = ctypes.util.find_library("jemalloc") if sys.platform.startswith("linux") else None
needs_jemalloc = pytest.mark.skipif(SYSTEM_JEMALLOC is None, reason="no jemalloc installed (apt install libjemalloc2)")
needs_glibc = pytest.mark.skipif(glibc() is None, reason="malloc_trim is glibc's")
MB = 1024 * 1024
BOUNDED_MEMORY = {"nlp": {"after_pipeline_creation": {"@callbacks": "spacy-pairatt.bounded_memory.v1"}}}

# Builds and trains a tiny pipeline, then parses 300 EWT dev sentences with it, recording every C function
# looked up by ctypes (the audit event ctypes.dlsym) and every exec from the first Doc on: what the
# components themselves do to the process.
PARSE_AND_WATCH = """
import json, os, sys
sys.path.insert(0, sys.argv[3])
from tests.conftest import examples_from_docs, make_pipeline, read_conllu_sentences
from pathlib import Path
nlp = make_pipeline(sys.argv[1])
gold = read_conllu_sentences(Path(sys.argv[2]), 300)
nlp.initialize(lambda: examples_from_docs(nlp, gold[:20]))
environ = dict(os.environ)
seen = []
watching = [True]
sys.addaudithook(lambda event, args: seen.append([event, str(args[-1])])
                 if watching[0] and event in ("ctypes.dlsym", "ctypes.dlopen", "os.exec", "os.posix_spawn") else None)
n_words = sum(len(doc) for doc in nlp.pipe((doc.text for doc in gold), batch_size=16))
watching[0] = False
print(json.dumps({"calls": seen, "environ_same": dict(os.environ) == environ, "words": n_words}))
"""


def test_parsing_with_a_default_pipeline_leaves_the_allocator_and_environment_alone(tiny_bert_dir):
    """No mallopt, malloc_trim, mallctl or re-exec from the pipes: a component is a guest in its user's process."""
    dev = UD_DIR / "en_ewt-ud-dev.conllu"
    run = subprocess.run([sys.executable, "-c", PARSE_AND_WATCH, tiny_bert_dir, str(dev), str(ROOT)],
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout.splitlines()[-1])
    assert report["words"] > 3000 and report["environ_same"]
    touched = [name for event, name in report["calls"] if "malloc" in name or "mallopt" in name or "mallctl" in name]
    assert touched == [] and not [event for event, _ in report["calls"] if event.startswith("os.")]


def test_the_runtime_does_not_import_the_memory_module():
    """components/, layers/ and core/ reach no allocator control: only the opt-in pipe's module
    (components/bounded_memory.py) imports memory.py."""
    script = (
        "import sys, importlib, pkgutil, spacy_pairatt\n"
        "for package in ('components', 'layers', 'core'):\n"
        "    module = importlib.import_module(f'spacy_pairatt.{package}')\n"
        "    for info in pkgutil.iter_modules(module.__path__):\n"
        "        if info.name != 'bounded_memory':\n"
        "            importlib.import_module(f'spacy_pairatt.{package}.{info.name}')\n"
        "print('spacy_pairatt.integration.memory' in sys.modules)\n"
        "importlib.import_module('spacy_pairatt.components.bounded_memory')\n"
        "print('spacy_pairatt.integration.memory' in sys.modules)"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert run.stdout.split() == ["False", "True"], run.stderr[-2000:]


HELP_AND_WATCH = """
import atexit, runpy, sys
execs = []
sys.addaudithook(lambda event, args: execs.append(event) if event in ("os.exec", "os.posix_spawn") else None)
atexit.register(lambda: print("execs:", execs, "spacy:", "spacy" in sys.modules))
sys.argv = ["spacy_pairatt", "--help"]
runpy.run_module("spacy_pairatt", run_name="__main__")
"""


def test_the_command_line_runs_in_one_process():
    run = subprocess.run([sys.executable, "-c", HELP_AND_WATCH], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "parse" in run.stdout
    assert run.stdout.splitlines()[-1] == "execs: [] spacy: False"


@pytest.fixture
def fake_glibc(monkeypatch):
    libc = FakeGlibc()
    monkeypatch.setattr(memory, "glibc", lambda: libc)
    monkeypatch.setattr(memory, "jemalloc_version", lambda: None)
    return libc


class FakeGlibc:
    """Records what ParsingHeapBound asks of glibc."""

    def __init__(self):
        self.trims, self.settings = [], []

    def malloc_trim(self, pad: int) -> None:
        self.trims.append(pad)

    def mallopt(self, option: int, value: int) -> int:
        self.settings.append((option, value))
        return 1


def test_the_opt_in_callback_adds_the_pipe_once_and_it_counts_every_parsed_word(
    tiny_bert_dir, ud_train_docs, tmp_path, fake_glibc, monkeypatch
):
    """Saved and loaded again, the pipeline keeps one pipe; parsing counts its words and sets glibc up once."""
    monkeypatch.setattr(memory, "_training_thresholds_set", False)
    nlp = make_pipeline(tiny_bert_dir)
    nlp.initialize(lambda: examples_from_docs(nlp, ud_train_docs[:5]))
    nlp.to_disk(tmp_path / "plain")
    bounded = spacy.load(tmp_path / "plain", config=BOUNDED_MEMORY)
    assert bounded.pipe_names[-1] == "pairatt_bounded_memory"
    bound = bounded.get_pipe("pairatt_bounded_memory").bound
    assert memory.parsing_heap_bound() is bound
    bounded.to_disk(tmp_path / "bounded")
    assert spacy.load(tmp_path / "bounded").pipe_names.count("pairatt_bounded_memory") == 1
    docs = list(bounded.pipe([doc.text for doc in ud_train_docs[:30]], batch_size=8))
    assert bound.words == sum(len(doc) for doc in docs) % bound.words_between_checks
    assert fake_glibc.settings == [(memory.M_MMAP_THRESHOLD, memory.PARSING_MMAP_THRESHOLD_BYTES)]
    assert memory.ParsingHeapBound().started is False  # nothing before the first words


def test_each_pipe_hands_the_heap_back_by_its_own_settings(monkeypatch, fake_glibc):
    """The issue's case: the process's one bound took the last pipe's settings, and a later pipe with the
    default growth kept an earlier pipe's min_growth_mb."""
    rss = {"now": 500 * MB}
    monkeypatch.setattr(memory, "resident_bytes", lambda: rss["now"])
    eager, default = spacy.blank("en"), spacy.blank("en")
    eager.add_pipe("pairatt_bounded_memory", config={"words_between_checks": 5, "min_growth_mb": 16})
    default.add_pipe("pairatt_bounded_memory")
    eager_bound, default_bound = (nlp.get_pipe("pairatt_bounded_memory").bound for nlp in (eager, default))
    assert memory.parsing_heap_bound() is default_bound
    rss["now"] += 20 * MB
    default(" ".join(["word"] * 1000))  # 20 MB is below glibc's default growth: nothing handed back
    assert fake_glibc.trims == [] and default_bound.min_growth_bytes == memory.MIN_GROWTH_BYTES["glibc"]
    eager("one two three four five")
    assert fake_glibc.trims == [0] and (eager_bound.returns, default_bound.returns) == (1, 0)
    assert (eager_bound.words_between_checks, eager_bound.min_growth_bytes) == (5, 16 * MB)
    assert default_bound.words_between_checks == memory.WORDS_BETWEEN_CHECKS


@pytest.mark.parametrize("setting", [{"words_between_checks": 0}, {"min_growth_mb": -1}])
def test_the_pipe_refuses_settings_below_one(setting):
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match="must be 1 or more"):
        nlp.add_pipe("pairatt_bounded_memory", config=setting)


@needs_glibc
def test_returning_free_pages_hands_back_holes_inside_the_heap():
    """Holes in the heap (every other 64 kB block freed, the rest kept) are not given back by free():
    only malloc_trim is. The drop in RSS is most of the holes' 64 MB."""
    libc = glibc()
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(64 * 1024) for _ in range(2048)]
    try:
        for block in blocks:
            ctypes.memset(block, 1, 64 * 1024)
        for block in blocks[::2]:
            libc.free(block)
        before = resident_bytes()
        assert ParsingHeapBound(words_between_checks=1, min_growth_bytes=0).return_free_pages()
        assert before - resident_bytes() > 40 * MB
    finally:
        for block in blocks[1::2]:
            libc.free(block)


def test_returns_come_once_per_interval_of_words_and_only_after_growth(monkeypatch, fake_glibc):
    rss = {"now": 500 * MB}
    monkeypatch.setattr(memory, "resident_bytes", lambda: rss["now"])
    bound = ParsingHeapBound(words_between_checks=100, min_growth_bytes=32 * MB)
    assert not bound.parsed(60)  # within the interval
    rss["now"] += 20 * MB
    assert not bound.parsed(60)  # the interval is over, but RSS grew too little
    rss["now"] += 40 * MB
    assert not bound.parsed(99)
    assert bound.parsed(1) and fake_glibc.trims == [0] and bound.rss_after_return == 560 * MB
    assert not bound.parsed(100)  # no growth since


def test_parsing_fixes_the_mmap_threshold_once_unless_training_has(monkeypatch, fake_glibc):
    monkeypatch.setattr(memory, "_training_thresholds_set", False)
    bound = ParsingHeapBound(words_between_checks=100, min_growth_bytes=32 * MB)
    bound.parsed(10)
    bound.parsed(10)
    assert fake_glibc.settings == [(memory.M_MMAP_THRESHOLD, 4 * MB)]
    monkeypatch.setattr(memory, "_training_thresholds_set", True)  # training's tighter thresholds stay
    ParsingHeapBound(words_between_checks=100, min_growth_bytes=32 * MB).parsed(10)
    assert fake_glibc.settings == [(memory.M_MMAP_THRESHOLD, 4 * MB)]


class FakeJemalloc:
    """Records what ParsingHeapBound asks of jemalloc (hold_freed_pages, purge_freed_pages)."""

    def __init__(self, monkeypatch):
        self.calls = []
        monkeypatch.setattr(memory, "glibc", lambda: None)
        monkeypatch.setattr(memory, "jemalloc_version", lambda: "5.3.0-0-g54eaed1")
        monkeypatch.setattr(memory, "hold_freed_pages", lambda: self.calls.append("hold") or True)
        monkeypatch.setattr(memory, "purge_freed_pages", lambda: self.calls.append("purge") or True)


@pytest.mark.parametrize("training", [False, True])
def test_under_jemalloc_parsing_holds_freed_pages_once_and_returns_them_by_purging(monkeypatch, training):
    """Training keeps jemalloc's own purging: it frees more between evaluations than parsing between returns."""
    rss = {"now": 500 * MB}
    monkeypatch.setattr(memory, "resident_bytes", lambda: rss["now"])
    monkeypatch.setattr(memory, "_training_process", training)
    jemalloc = FakeJemalloc(monkeypatch)
    bound = ParsingHeapBound(words_between_checks=100, min_growth_bytes=32 * MB)
    assert not bound.parsed(100)
    rss["now"] += 40 * MB
    assert bound.parsed(100) and bound.returns == 1
    assert jemalloc.calls == (["purge"] if training else ["hold", "purge"])


@pytest.mark.parametrize("allocator", ["glibc", "jemalloc"])
def test_the_growth_between_returns_is_the_allocators_unless_set(monkeypatch, allocator):
    """glibc's trim hands back the whole free heap; jemalloc reuses freed pages and returns at less growth."""
    if allocator == "glibc":
        monkeypatch.setattr(memory, "glibc", lambda: FakeGlibc())
    else:
        FakeJemalloc(monkeypatch)
    default = ParsingHeapBound(words_between_checks=100)
    default.parsed(1)
    assert default.min_growth_bytes == memory.MIN_GROWTH_BYTES[allocator]
    assert memory.MIN_GROWTH_BYTES["jemalloc"] < memory.MIN_GROWTH_BYTES["glibc"]
    chosen = ParsingHeapBound(words_between_checks=100, min_growth_bytes=16 * MB)
    chosen.parsed(1)
    assert chosen.min_growth_bytes == 16 * MB


def test_under_another_allocator_nothing_is_returned(monkeypatch):
    monkeypatch.setattr(memory, "glibc", lambda: None)
    monkeypatch.setattr(memory, "jemalloc_version", lambda: None)
    monkeypatch.setattr(memory, "resident_bytes", lambda: 10**12)
    bound = ParsingHeapBound(words_between_checks=1)
    assert not bound.parsed(10) and bound.returns == 0


ARRAYS_FREED_UNDER_A_THRESHOLD = """
import ctypes, sys
from spacy_pairatt.integration import memory
MB = 2**20
libc = memory.glibc()
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
memory.set_mmap_threshold(int(sys.argv[1]))
blocks = [libc.malloc(8 * MB) for _ in range(16)]
for block in blocks:
    ctypes.memset(block, 1, 8 * MB)
before = memory.resident_bytes()
for block in blocks[::2]:
    libc.free(block)
print(before - memory.resident_bytes())
"""


@needs_glibc
@pytest.mark.parametrize("threshold,returned", [(memory.GLIBC_MMAP_THRESHOLD_MAX, False), (4 * MB, True)])
def test_arrays_above_the_threshold_go_back_to_the_system_when_freed(threshold, returned):
    """Blocks of 8 MB freed between live ones, in a fresh process (where no free chunk of the heap can
    serve them): kept in the heap under glibc's risen threshold (its ceiling, 32 MB), handed back at
    once under the parsing threshold of 4 MB."""
    run = subprocess.run([sys.executable, "-c", ARRAYS_FREED_UNDER_A_THRESHOLD, str(threshold)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    dropped = int(run.stdout.split()[-1])
    assert dropped > 56 * MB if returned else dropped < 16 * MB


@pytest.fixture
def library(tmp_path):
    """A file that starts like a shared library."""
    path = tmp_path / "libjemalloc.so.2"
    path.write_bytes(memory.ELF_MAGIC + bytes(60))
    return str(path)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD is Linux's")
def test_a_named_library_goes_first_in_ld_preload_and_the_others_stay(library):
    environ = environment_with_jemalloc({ALLOCATOR_VARIABLE: library, "LD_PRELOAD": "libfoo.so:libbar.so", "X": "1"})
    assert environ == {ALLOCATOR_VARIABLE: library, "LD_PRELOAD": f"{library} libfoo.so libbar.so", "X": "1"}


def test_no_restart_for_the_system_allocator_or_a_library_already_preloaded(library, monkeypatch):
    assert environment_with_jemalloc({ALLOCATOR_VARIABLE: "system"}) is None
    # LD_PRELOAD names it but it does not allocate: it failed to load, and starting again would loop
    assert environment_with_jemalloc({ALLOCATOR_VARIABLE: library, "LD_PRELOAD": library}) is None
    monkeypatch.setattr(memory, "jemalloc_version", lambda: "5.3.0-0-g54eaed1")
    assert environment_with_jemalloc({ALLOCATOR_VARIABLE: library}) is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD is Linux's")
def test_an_empty_choice_is_the_default():
    assert jemalloc_library({ALLOCATOR_VARIABLE: ""}) == jemalloc_library({})


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD is Linux's")
@pytest.mark.parametrize("name,problem", [("dir with space/libjemalloc.so", "a space or a colon"),
                                          ("a:b/libjemalloc.so", "a space or a colon"),
                                          ("nowhere/libjemalloc.so", "no such file"),
                                          ("notes.txt", "not a shared library")])  # fmt: skip
def test_a_library_path_that_cannot_work_is_named_in_one_line(tmp_path, name, problem):
    """A space or colon split LD_PRELOAD and restarted the command thousands of times."""
    path = tmp_path / name
    if problem != "no such file":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("not a library")
    with pytest.raises(SystemExit, match=f"{ALLOCATOR_VARIABLE}=.*{problem}"):
        jemalloc_library({ALLOCATOR_VARIABLE: str(path)})


MAIN_MODULE = str(ROOT / "spacy_pairatt" / "__main__.py")  # sys.argv[0] of `python -m spacy_pairatt`


def test_only_the_command_line_itself_restarts(monkeypatch):
    """A script that runs the command line in-process (runpy) keeps its process, argv and stdin."""
    arguments = ["parse", "model", "-", "--bounded-memory"]
    monkeypatch.setattr(memory, "environment_with_jemalloc", lambda environ: {"LD_PRELOAD": "libjemalloc.so.2"})
    monkeypatch.setattr(os, "execve", lambda *args: pytest.fail("restarted"))
    for started, argv in (([sys.executable, "script.py", *arguments], ["script.py", *arguments]),
                          ([sys.executable, "-c", "..."], [MAIN_MODULE, *arguments])):  # fmt: skip
        monkeypatch.setattr(sys, "orig_argv", started, raising=False)
        monkeypatch.setattr(sys, "argv", argv)
        memory.restart_with_jemalloc(arguments)


@pytest.mark.parametrize("options", [[], ["-u"], ["-X", "importtime", "-W", "ignore", "-B"], ["-u", "-mspacy_pairatt"]])
def test_the_restart_keeps_the_interpreters_options(monkeypatch, options):
    """The issue's case: `python -u -m spacy_pairatt parse --bounded-memory` skipped the restart, silently."""
    arguments = ["parse", "model", "-", "--bounded-memory"]
    module = [] if options[-1:] == ["-mspacy_pairatt"] else ["-m", "spacy_pairatt"]
    monkeypatch.setattr(sys, "orig_argv", ["python", *options, *module, *arguments], raising=False)
    monkeypatch.setattr(sys, "argv", [MAIN_MODULE, *arguments])
    monkeypatch.setattr(memory, "environment_with_jemalloc", lambda environ: {"LD_PRELOAD": "libjemalloc.so.2"})
    restarted = []
    monkeypatch.setattr(os, "execve", lambda path, argv, environ: restarted.append((path, argv, environ)))
    memory.restart_with_jemalloc(arguments)
    command = [sys.executable, *options, *module, *arguments]
    assert restarted == [(sys.executable, command, {"LD_PRELOAD": "libjemalloc.so.2"})]


# Frees 64 MB (a run jemalloc would purge the moment it is freed) once parsing has started its heap bound,
# then returns the pages; prints the free bytes jemalloc holds after each step.
HOLD_AND_RETURN = """
import sys
import numpy
from spacy_pairatt.integration import memory
if sys.argv[1] == "training":
    memory.limit_heap_fragmentation()
bound = memory.ParsingHeapBound()
bound.start()
array = numpy.ones(64 << 20, dtype=numpy.uint8)
del array
held = memory.heap_usage()["free"]
print(held >= 64 << 20, bound.return_free_pages(), memory.heap_usage()["free"])
"""


def run_under_jemalloc(script: str, *arguments: str) -> str:
    environ = {**os.environ, "LD_PRELOAD": SYSTEM_JEMALLOC}
    command = [sys.executable, "-c", script, *arguments]
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=120, env=environ).stdout


@needs_jemalloc
def test_the_heap_bound_holds_freed_pages_until_it_hands_them_back():
    assert run_under_jemalloc(HOLD_AND_RETURN, "parsing").split() == ["True", "True", "0"]


@needs_jemalloc
def test_a_training_process_keeps_jemalloc_purging_on_its_own():
    held, returned, _ = run_under_jemalloc(HOLD_AND_RETURN, "training").split()
    assert (held, returned) == ("False", "True")


@pytest.mark.parametrize("option,value", [("--words-between-checks", "0"), ("--min-growth-mb", "-3")])
def test_the_memory_bench_refuses_a_setting_below_one(option, value):
    """0 words between checks was read as "the pipe's default" and run silently."""
    run = subprocess.run([sys.executable, str(ROOT / "projects" / "paper" / "bench" / "memory.py"), option, value],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 2 and f"argument {option}: must be more than 0, got {value}" in run.stderr
