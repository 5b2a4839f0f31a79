"""Flat memory while parsing: the pair-scoring components hand free heap back to the system every so
many parsed words, mapping large arrays under glibc and holding freed pages under jemalloc
(`integration/memory.py`); results/bench_memory.json measures it."""

import ctypes
import subprocess
import sys
from pathlib import Path

import pytest

from spacy_pairatt.integration import memory
from spacy_pairatt.integration.memory import FreeHeapRelease, glibc, resident_bytes
from tests.conftest import examples_from_docs, make_pipeline

needs_glibc = pytest.mark.skipif(glibc() is None, reason="malloc_trim is glibc's")
MB = 1024 * 1024


@needs_glibc
def test_a_release_returns_free_pages_inside_the_heap():
    """Holes in the heap (every other 64 kB block freed, the rest kept) are not given back by free():
    only a release is. The drop in RSS is most of the holes' 64 MB."""
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
        release = FreeHeapRelease(words_between=1, min_growth_bytes=0, mmap_threshold_bytes=4 * MB)
        release.rss_after_release = 0
        assert release.parsed(1)
        assert before - resident_bytes() > 40 * MB
    finally:
        for block in blocks[1::2]:
            libc.free(block)


class FakeGlibc:
    """Records what FreeHeapRelease asks of glibc."""

    def __init__(self):
        self.trims, self.settings = [], []

    def malloc_trim(self, pad: int) -> None:
        self.trims.append(pad)

    def mallopt(self, option: int, value: int) -> int:
        self.settings.append((option, value))
        return 1


def test_releases_come_once_per_interval_of_words_and_only_after_growth(monkeypatch):
    rss = {"now": 500 * MB}
    monkeypatch.setattr(memory, "resident_bytes", lambda: rss["now"])
    libc = FakeGlibc()
    monkeypatch.setattr(memory, "glibc", lambda: libc)
    release = FreeHeapRelease(words_between=100, min_growth_bytes=32 * MB, mmap_threshold_bytes=4 * MB)
    assert not release.parsed(60)  # within the interval
    rss["now"] += 20 * MB
    assert not release.parsed(60)  # the interval is over, but RSS grew too little
    rss["now"] += 40 * MB
    assert not release.parsed(99)
    assert release.parsed(1) and libc.trims == [0] and release.rss_after_release == 560 * MB
    assert not release.parsed(100)  # no growth since the release
    assert not FreeHeapRelease(words_between=0, min_growth_bytes=0, mmap_threshold_bytes=4 * MB).parsed(10**9)  # off


def test_parsing_fixes_the_mmap_threshold_once_unless_training_has(monkeypatch):
    libc = FakeGlibc()
    monkeypatch.setattr(memory, "glibc", lambda: libc)
    monkeypatch.setattr(memory, "_applied", False)  # as in a process that has not trained
    release = FreeHeapRelease(words_between=100, min_growth_bytes=32 * MB, mmap_threshold_bytes=4 * MB)
    release.parsed(10)
    release.parsed(10)
    assert libc.settings == [(memory.M_MMAP_THRESHOLD, 4 * MB)]
    off = FreeHeapRelease(words_between=0, min_growth_bytes=32 * MB, mmap_threshold_bytes=4 * MB)
    off.parsed(10)
    assert libc.settings == [(memory.M_MMAP_THRESHOLD, 4 * MB)]  # turned off: glibc's own thresholds
    monkeypatch.setattr(memory, "_applied", True)  # training's tighter thresholds stay
    FreeHeapRelease(words_between=100, min_growth_bytes=32 * MB, mmap_threshold_bytes=4 * MB).parsed(10)
    assert libc.settings == [(memory.M_MMAP_THRESHOLD, 4 * MB)]


class FakeJemalloc:
    """Records what FreeHeapRelease asks of jemalloc (allocator.hold_freed_pages, purge_freed_pages)."""

    def __init__(self, monkeypatch):
        self.calls = []
        monkeypatch.setattr(memory, "glibc", lambda: None)
        monkeypatch.setattr(memory, "jemalloc_version", lambda: "5.3.0-0-g54eaed1")
        monkeypatch.setattr(memory, "hold_freed_pages", lambda: self.calls.append("hold") or True)
        monkeypatch.setattr(memory, "purge_freed_pages", lambda: self.calls.append("purge") or True)


@pytest.mark.parametrize("training", [False, True])
def test_under_jemalloc_parsing_holds_freed_pages_once_and_releases_by_purging(monkeypatch, training):
    """Training keeps jemalloc's own purging: it frees more between evaluations than parsing between releases."""
    rss = {"now": 500 * MB}
    monkeypatch.setattr(memory, "resident_bytes", lambda: rss["now"])
    monkeypatch.setattr(memory, "_training_bound", training)
    jemalloc = FakeJemalloc(monkeypatch)
    release = FreeHeapRelease(words_between=100, min_growth_bytes=32 * MB, mmap_threshold_bytes=4 * MB)
    assert not release.parsed(100)
    rss["now"] += 40 * MB
    assert release.parsed(100) and release.releases == 1
    assert jemalloc.calls == (["purge"] if training else ["hold", "purge"])


@pytest.mark.parametrize("allocator", ["glibc", "jemalloc"])
def test_the_growth_between_releases_is_the_allocators_unless_set(monkeypatch, allocator):
    """glibc's trim hands back the whole free heap; jemalloc reuses freed pages and releases at less growth."""
    if allocator == "glibc":
        monkeypatch.setattr(memory, "glibc", lambda: FakeGlibc())
    else:
        FakeJemalloc(monkeypatch)
    default = FreeHeapRelease(words_between=100, min_growth_bytes=None, mmap_threshold_bytes=4 * MB)
    default.parsed(1)
    assert default.min_growth_bytes == memory.MIN_GROWTH_BYTES[allocator]
    assert memory.MIN_GROWTH_BYTES["jemalloc"] < memory.MIN_GROWTH_BYTES["glibc"]
    chosen = FreeHeapRelease(words_between=100, min_growth_bytes=16 * MB, mmap_threshold_bytes=4 * MB)
    chosen.parsed(1)
    assert chosen.min_growth_bytes == 16 * MB


def test_under_another_allocator_nothing_is_released(monkeypatch):
    monkeypatch.setattr(memory, "glibc", lambda: None)
    monkeypatch.setattr(memory, "jemalloc_version", lambda: None)
    monkeypatch.setattr(memory, "resident_bytes", lambda: 10**12)
    release = FreeHeapRelease(words_between=1, min_growth_bytes=None, mmap_threshold_bytes=4 * MB)
    assert not release.parsed(10) and release.releases == 0


def test_under_jemalloc_a_release_turned_off_leaves_jemalloc_alone(monkeypatch):
    jemalloc = FakeJemalloc(monkeypatch)
    monkeypatch.setattr(memory, "_training_bound", False)
    assert not FreeHeapRelease(words_between=0, min_growth_bytes=0, mmap_threshold_bytes=4 * MB).parsed(10**6)
    assert jemalloc.calls == []


ARRAYS_FREED_UNDER_A_THRESHOLD = """
import ctypes, sys
from spacy_pairatt.integration import memory
MB = 2**20
libc = memory.glibc()
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
memory.FreeHeapRelease(1, 2**60, int(sys.argv[1])).parsed(1)
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


def test_parsing_reports_its_words_to_the_process_heap_release(tiny_bert_dir, ud_train_docs, monkeypatch):
    nlp = make_pipeline(tiny_bert_dir)
    nlp.initialize(lambda: examples_from_docs(nlp, ud_train_docs[:5]))
    counted = []
    monkeypatch.setattr(memory.HEAP_RELEASE, "parsed", counted.append)
    texts = ["The cat sat on the mat .", "It did n't move at all ."]
    docs = list(nlp.pipe(texts, batch_size=1)) + [nlp(texts[0])]
    assert counted == [len(doc) for doc in docs]


def test_the_known_limit_goes_once_the_benchmark_is_within_the_bars(tmp_path):
    """limits.heap: the growth and the speed cost while either bar is missed, led by jemalloc's figures
    where it meets both; nothing once glibc's release meets both."""
    import json

    from docs_build.limits import heap as heap_limit
    from docs_build.limits import limits
    from docs_build.results import Results

    def runs(peak_20k, longest=20000):
        return [{"sentences": 2000, "heap_release": True, "peak_rss_mb_while_parsing": 1000.0},
                {"sentences": longest, "heap_release": True, "peak_rss_mb_while_parsing": peak_20k}]  # fmt: skip

    def bench(peak_20k, cost, longest=20000, mmap_threshold=None, jemalloc=None):
        memory = {"runs": runs(peak_20k, longest), "peak_rss_growth": peak_20k / 1000 - 1,
                  "heap_release": {"words_between": 1000, "min_growth_bytes": 64 * MB},
                  "speed_check": {"speed_cost_at_default_interval": cost},
                  "bytes_kept_per_doc": {"no release component": 500000, "release": 50000},
                  "provenance": {"created": "2100-01-01T00:00:00+00:00"}}  # fmt: skip
        if mmap_threshold:
            memory["heap_release"]["mmap_threshold_bytes"] = mmap_threshold
        if jemalloc:
            peak, cost = jemalloc
            check = {"speed_cost": cost, "mean_ratio_jemalloc_over_glibc": 1 - cost}
            memory["jemalloc"] = {"version": "jemalloc 5.3.0", "runs": runs(peak), "speed_check": check}
        (tmp_path / "results").mkdir(exist_ok=True)
        (tmp_path / "results" / "bench_memory.json").write_text(json.dumps(memory), "utf8")
        return Results(tmp_path)

    assert "grew +12% from 2,000 to 20,000" in heap_limit(bench(1120.0, 0.01))
    assert "at 4.0% of parse speed (target 3%)" in heap_limit(bench(1050.0, 0.04))
    assert "On glibc's malloc, parsing maps arrays of 4 MB and more (glibc's mmap threshold) and hands" in heap_limit(
        bench(1050.0, 0.04, mmap_threshold=4 * MB)
    )
    assert "On glibc's malloc, parsing hands" in heap_limit(bench(1050.0, 0.04))  # a bench made before the threshold
    assert "from 2,000 to 5,000" in heap_limit(bench(1050.0, 0.01, longest=5000))  # too short to tell
    flat = heap_limit(bench(1120.0, 0.04, jemalloc=(1050.0, -0.02)))
    assert flat.startswith("Under jemalloc 5.3.0, which") and "1,050 MB over 20,000" in flat
    assert "at 1.020 times the speed of glibc's malloc left alone (within the targets below). Without it, on" in flat
    assert "(not within the targets below)" in heap_limit(bench(1120.0, 0.04, jemalloc=(1050.0, 0.05)))  # too slow
    assert "(not within the targets below)" in heap_limit(bench(1120.0, 0.04, jemalloc=(1120.0, 0.0)))  # grows
    results = bench(1050.0, 0.01)
    assert heap_limit(results) is None
    assert not any("heap" in text for text in limits(results, ud_pipeline=False))


@pytest.mark.parametrize("option,value", [("--release-words", "0"), ("--release-growth-mb", "-3")])
def test_the_memory_bench_refuses_a_release_setting_below_one(option, value):
    """0 words between releases was read as "the components' default" and run silently."""
    bench = Path(__file__).resolve().parents[2] / "bench" / "memory.py"
    run = subprocess.run([sys.executable, str(bench), option, value], capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and f"argument {option}: must be more than 0, got {value}" in run.stderr
