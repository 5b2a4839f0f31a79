"""Memory benchmark: peak RSS of nlp.pipe over streams of EWT sentences (`--sizes`: 2,000 and 20,000 by
default; bench-memory adds 50,000), under each allocator `--allocators` names.

Each size runs in a fresh process: the pairatt pipeline with `pairatt_release_attention` after
the parser, over EWT sentences (train, dev, test, cycled), streamed through `nlp.pipe` as a user
parsing a large corpus would. RSS is sampled every 50 Docs while parsing; the process peak also
counts building the pipeline. Allocators: "glibc", the C library's malloc, and "jemalloc", preloaded as
`parse --bounded-memory` does where the system has it (skipped, and said so, where it has not). Under
either, the opt-in `pairatt_bounded_memory` pipe hands free pages back as they parse
(`integration/memory.py`; `--compare-without-release` adds each glibc size without it).

What each costs in speed against glibc's malloc left alone (no release, its mmap threshold at the
ceiling its own rising threshold reaches in a long parse), over blocks of the same 30,000 words of
sentences: for glibc's release, off and on in turn in one fresh process, so that the machine's load
falls on both alike; for jemalloc with its release, which a process cannot switch to, in fresh
processes taking turns with glibc's left alone (ABBA), each timing the block twice. Also what one
parsed Doc keeps with and without the release component, for users who hold on to their Docs.

    python bench/memory.py --model training/pairatt/model-best --sizes 2000,20000,50000 \
        --output results/bench_memory.json
"""

import argparse
import itertools
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np
import spacy
from pipelines import build_pipeline, load_docs, unannotated
from spacy.language import Language
from spacy.tokens import Doc

from spacy_pairatt.integration.memory import (
    ALLOCATOR_VARIABLE,
    GLIBC_MMAP_THRESHOLD_MAX,
    PARSING_MMAP_THRESHOLD_BYTES,
    WORDS_BETWEEN_CHECKS,
    allocator_name,
    glibc,
    heap_usage,
    jemalloc_library,
    parsing_heap_bound,
    preloaded,
    preloading,
    set_mmap_threshold,
)
from spacy_pairatt.reporting.json_files import write_json
from spacy_pairatt.reporting.provenance import code_at_start, provenance

CORPUS = tuple(f"corpus/ud_ewt/en_ewt-ud-{split}.spacy" for split in ("train", "dev", "test"))
SPEED_BLOCK_WORDS = 30_000
SPEED_PASSES = 2  # per process, in jemalloc's speed check


def positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def sentences(gold: List[Doc], n: int) -> Iterator[Doc]:
    for doc in itertools.islice(itertools.cycle(gold), n):
        yield unannotated([doc])[0]


def retained_bytes(doc: Doc) -> int:
    """Bytes of the arrays a Doc keeps in its transformer data and word-level attention."""
    total = 0
    data = doc._.trf_data
    if data is not None:
        for value in data.model_output.values():
            for array in value if isinstance(value, (list, tuple)) else [value]:
                total += getattr(array, "nbytes", 0)
    if Doc.has_extension("pairatt_attention") and doc._.pairatt_attention:
        total += sum(array.nbytes for _, _, array in doc._.pairatt_attention)
    return total


def pipeline(model: str, release: bool = True, heap_bound: Optional[Dict] = None):
    """The trained pipeline at `model`, or (empty) one initialised from configs/parser_minilm.cfg;
    with `pairatt_release_attention` at the end when release, and `pairatt_bounded_memory` with the
    config `heap_bound` where given."""
    if model:
        nlp = spacy.load(model)
    else:
        nlp = build_pipeline("parser_minilm", Path(CORPUS[0]))
    if release and "pairatt_release_attention" not in nlp.pipe_names:
        nlp.add_pipe("pairatt_release_attention")
    if not release and "pairatt_release_attention" in nlp.pipe_names:
        nlp.remove_pipe("pairatt_release_attention")
    if heap_bound is not None:
        nlp.add_pipe("pairatt_bounded_memory", config=heap_bound)
    return nlp


def child(n: int, heap_bound: Optional[Dict], batch_size: int, model: str) -> Dict:
    nlp = pipeline(model, heap_bound=heap_bound)
    bound = parsing_heap_bound()
    list(nlp.pipe(unannotated(load_docs(Path(CORPUS[2]), nlp, 64)), batch_size=batch_size))  # warm-up
    gold = [doc for path in CORPUS for doc in load_docs(Path(path), nlp)]
    before = rss_mb()
    n_words, parsing_peak = 0, before
    start = time.perf_counter()
    for i, doc in enumerate(nlp.pipe(sentences(gold, n), batch_size=batch_size)):
        n_words += len(doc)
        if i % 50 == 0:
            parsing_peak = max(parsing_peak, rss_mb())
    seconds = time.perf_counter() - start
    heap = heap_usage() or {}
    return {
        "sentences": n,
        "allocator": allocator_name(),
        # which checkpoint of a trained model ran (spacy train rewrites model-best as it improves)
        "model_dev_las": nlp.meta.get("performance", {}).get("dep_las") if model else None,
        "release_component": True,
        "heap_release": heap_bound is not None,
        "heap_releases": bound.returns,
        "heap_release_seconds": round(bound.seconds, 3),
        "heap_release_growth_bytes": bound.min_growth_bytes if heap_bound is not None else None,
        # the heap once the stream is parsed: in use (live data) against free (kept by the allocator)
        **{f"heap_{kind}_mb_at_end": round(size / 2**20, 1) for kind, size in heap.items()},
        "rss_mb_before_parsing": round(before, 1),
        "peak_rss_mb_while_parsing": round(parsing_peak, 1),
        "peak_rss_mb_process": round(peak_rss_mb(), 1),
        "seconds": round(seconds, 1),
        "words_per_second": round(n_words / seconds, 1),
    }


def mean_ratio(speeds: Dict[str, List[float]], over: str, under: str) -> float:
    """Mean speed of one setting over mean speed of the other (ABBA blocks: a linear drift cancels)."""
    return float(np.mean(speeds[over]) / np.mean(speeds[under]))


def speed_block(model: str, batch_size: int, heap_bound: Optional[Dict]) -> Tuple[Language, List[Doc], int]:
    """The pipeline, the speed checks' block of EWT dev sentences (cycled to SPEED_BLOCK_WORDS words,
    long enough for the releases of a steady stream) and its words, after a warm-up pass."""
    nlp = pipeline(model, heap_bound=heap_bound)
    gold = load_docs(Path(CORPUS[1]), nlp)
    block, n_words = [], 0
    for doc in itertools.cycle(gold):
        block.append(doc)
        n_words += len(doc)
        if n_words >= SPEED_BLOCK_WORDS:
            break
    list(nlp.pipe(unannotated(block[:64]), batch_size=batch_size))  # warm-up
    return nlp, block, n_words


def timed_pass(nlp: Language, block: List[Doc], batch_size: int) -> Tuple[float, float]:
    """Wall and CPU seconds of one pass of nlp.pipe over the block."""
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in nlp.pipe(unannotated(block), batch_size=batch_size):
        pass
    return time.perf_counter() - start, time.process_time() - cpu_start


def allocator_speed_child(passes: int, batch_size: int, model: str, heap_bound: Dict) -> Dict:
    """words/s of `passes` passes over the speed block, after one untimed, under this process's allocator:
    glibc's malloc left alone (no heap bound, its mmap threshold at its ceiling), jemalloc with the
    heap bound (as `parse --bounded-memory` runs it)."""
    under_glibc = glibc() is not None
    if under_glibc:
        set_mmap_threshold(GLIBC_MMAP_THRESHOLD_MAX)
    nlp, block, n_words = speed_block(model, batch_size, None if under_glibc else heap_bound)
    timed_pass(nlp, block, batch_size)  # a fresh process's first pass is slower under either allocator
    bound = parsing_heap_bound()
    before = bound.returns
    times = [timed_pass(nlp, block, batch_size) for _ in range(passes)]
    return {
        "allocator": allocator_name(),
        "heap_releases": bound.returns - before,
        "words_per_second": [round(n_words / wall, 1) for wall, _ in times],
        "words_per_cpu_second": [round(n_words / cpu, 1) for _, cpu in times],
    }


def allocator_speed_check(pairs: int, common: List[str]) -> Dict:
    """jemalloc's speed, with the components' release, against glibc's malloc left alone: fresh processes
    taking turns (ABBA), each timing SPEED_PASSES passes over the speed block after an untimed one."""
    speeds: Dict[str, List[float]] = {"glibc": [], "jemalloc": []}
    cpu_speeds: Dict[str, List[float]] = {"glibc": [], "jemalloc": []}
    releases: List[int] = []  # jemalloc's, in each process's timed passes
    for pair in range(pairs):
        for allocator in ("glibc", "jemalloc") if pair % 2 == 0 else ("jemalloc", "glibc"):
            timed = run_child("--allocator-speed-child", str(SPEED_PASSES), *common, allocator=allocator)
            speeds[allocator] += timed["words_per_second"]
            cpu_speeds[allocator] += timed["words_per_cpu_second"]
            if allocator == "jemalloc":
                releases.append(timed["heap_releases"])
    wall_ratio, cpu_ratio = (mean_ratio(values, "jemalloc", "glibc") for values in (speeds, cpu_speeds))
    return {
        "processes_per_allocator": pairs,
        "passes_per_process": SPEED_PASSES,
        "heap_releases_jemalloc": releases,
        **{f"words_per_second_{name}": values for name, values in speeds.items()},
        **{f"words_per_cpu_second_{name}": values for name, values in cpu_speeds.items()},
        "mean_ratio_jemalloc_over_glibc": round(wall_ratio, 4),
        "speed_cost": round(1 - wall_ratio, 4),
        "cpu_cost": round(1 - cpu_ratio, 4),
    }


def allocator_environment(allocator: str) -> Optional[Dict[str, str]]:
    """The environment a child runs under `allocator` with: LD_PRELOAD without jemalloc for glibc,
    with the system's jemalloc (or SPACY_PAIRATT_ALLOCATOR's) first for jemalloc; None where there is none."""
    others = [name for name in preloaded(os.environ) if "jemalloc" not in name]
    environ = preloading({**os.environ, ALLOCATOR_VARIABLE: "system"}, others)
    if allocator == "glibc":
        return environ
    choice = os.environ.get(ALLOCATOR_VARIABLE, "system")
    library = jemalloc_library({ALLOCATOR_VARIABLE: "jemalloc" if choice == "system" else choice})
    return None if library is None else preloading(environ, [library, *others])


def speed_child(pairs: int, batch_size: int, model: str, heap_bound: Dict) -> Dict:
    """words/s of the same block of sentences with the heap bound off and on in turn (see the docstring)."""
    nlp, block, n_words = speed_block(model, batch_size, heap_bound)
    bound = parsing_heap_bound()
    bound.start()  # the growth between returns; the mmap threshold is set below, in turn
    speeds: Dict[str, List[float]] = {"off": [], "on": []}
    cpu_speeds: Dict[str, List[float]] = {"off": [], "on": []}  # per CPU second: what other work on the machine takes
    releases = []
    for pair in range(pairs):
        for setting in ("off", "on") if pair % 2 == 0 else ("on", "off"):  # ABBA: a drift in speed cancels
            # off: glibc's defaults as a long parse leaves them (its mmap threshold at its ceiling)
            set_mmap_threshold(PARSING_MMAP_THRESHOLD_BYTES if setting == "on" else GLIBC_MMAP_THRESHOLD_MAX)
            bound.words, before = 0, bound.returns
            with nlp.select_pipes(disable=[] if setting == "on" else ["pairatt_bounded_memory"]):
                wall, cpu = timed_pass(nlp, block, batch_size)
            speeds[setting].append(n_words / wall)
            cpu_speeds[setting].append(n_words / cpu)
            if setting == "on":
                releases.append(bound.returns - before)
    wall_ratio, cpu_ratio = (mean_ratio(values, "on", "off") for values in (speeds, cpu_speeds))
    return {
        "block_sentences": len(block),
        "block_words": n_words,
        "words_between_releases": bound.words_between_checks,
        "releases_per_on_block": releases,
        "words_per_second_off": [round(v, 1) for v in speeds["off"]],
        "words_per_second_on": [round(v, 1) for v in speeds["on"]],
        "mean_ratio_on_over_off": round(wall_ratio, 4),
        # the release as the components make it (the default settings): its share of parse time
        "speed_cost_at_default_interval": round(1 - wall_ratio, 4),
        "words_per_cpu_second_off": [round(v, 1) for v in cpu_speeds["off"]],
        "words_per_cpu_second_on": [round(v, 1) for v in cpu_speeds["on"]],
        "cpu_cost_at_default_interval": round(1 - cpu_ratio, 4),
    }


def kept_per_doc(batch_size: int, model: str, n_docs: int = 200) -> Dict:
    """Mean bytes a parsed Doc keeps (transformer output + word-level attention) per pipeline variant."""
    results = {}
    base = pipeline(model, release=False)
    docs = load_docs(Path(CORPUS[2]), base, n_docs)
    for label, keep in (("no release component", "absent"), ("release", None), ("release, keep float16", "float16")):
        nlp = base
        if keep != "absent":
            nlp.add_pipe("pairatt_release_attention", config={"keep": keep})
        parsed = list(nlp.pipe(unannotated(docs), batch_size=batch_size))
        results[label] = int(np.mean([retained_bytes(doc) for doc in parsed]))
        if keep != "absent":
            nlp.remove_pipe("pairatt_release_attention")
    return results


def run_child(*options: str, allocator: str = "glibc") -> Dict:
    """Run this script with `options` in a fresh process under `allocator`; its last line, parsed."""
    command = [sys.executable, __file__, *options]
    output = subprocess.run(
        command, check=True, capture_output=True, text=True, env=allocator_environment(allocator)
    ).stdout
    result = json.loads(output.strip().splitlines()[-1])
    print(result, flush=True)
    if not result.get("allocator", allocator).startswith(allocator):
        raise SystemExit(f"bench/memory.py: a child asked to run under {allocator} ran under {result['allocator']}")
    return result


def growth(runs: List[Dict], key: str = "peak_rss_mb_while_parsing") -> float:
    """The longest run's peak RSS over the shortest's, less one."""
    return round(runs[-1][key] / runs[0][key] - 1, 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2000,20000")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--model", default="", help="a trained pipeline (default: parser_minilm.cfg, initialised)")
    parser.add_argument(
        "--speed-pairs",
        type=int,
        default=12,
        help="off/on block pairs of the speed check (half as many for jemalloc's)",
    )
    parser.add_argument("--compare-without-release", action="store_true", help="each size again, heap release off")
    parser.add_argument(
        "--words-between-checks",
        type=positive,
        default=WORDS_BETWEEN_CHECKS,
        help="parsed words between looks at RSS growth (more than 0; default: the pipe's)",
    )
    parser.add_argument(
        "--min-growth-mb",
        type=positive,
        help="RSS growth in MB that hands the free heap back (more than 0; default: the allocator's)",
    )
    parser.add_argument(
        "--allocators", default="glibc,jemalloc", help="glibc (with the heap release), jemalloc (where installed)"
    )
    parser.add_argument("--output", default="results/bench_memory.json")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--speed-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--allocator-speed-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--no-heap-release", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    heap_bound = {"words_between_checks": args.words_between_checks, "min_growth_mb": args.min_growth_mb}
    if args.child:
        print(json.dumps(child(args.child, None if args.no_heap_release else heap_bound, args.batch_size, args.model)))
        return
    if args.speed_child:
        print(json.dumps(speed_child(args.speed_child, args.batch_size, args.model, heap_bound)))
        return
    if args.allocator_speed_child:
        print(json.dumps(allocator_speed_child(args.allocator_speed_child, args.batch_size, args.model, heap_bound)))
        return
    allocators = args.allocators.split(",")
    if not set(allocators) <= {"glibc", "jemalloc"} or "glibc" not in allocators:
        parser.error(f"--allocators: glibc, optionally with jemalloc (got {args.allocators!r})")
    if "jemalloc" in allocators and allocator_environment("jemalloc") is None:
        print("bench/memory.py: no jemalloc installed (apt install libjemalloc2): glibc only", file=sys.stderr)
        allocators = ["glibc"]
    common = ["--batch-size", str(args.batch_size), "--model", args.model]
    common += ["--words-between-checks", str(args.words_between_checks)]
    if args.min_growth_mb:
        common += ["--min-growth-mb", str(args.min_growth_mb)]
    runs: List[Dict] = []
    sizes = [int(size) for size in args.sizes.split(",")]
    for size in sizes:
        runs.append(run_child("--child", str(size), *common))
        if args.compare_without_release:
            runs.append(run_child("--child", str(size), "--no-heap-release", *common))
    if runs[0]["allocator"] != "glibc":
        raise SystemExit(f"bench/memory.py: the children ran under {runs[0]['allocator']}, not glibc's malloc")
    released = [run for run in runs if run["heap_release"]]
    smallest, largest = released[0], released[-1]
    result = {
        "model": args.model or "configs/parser_minilm.cfg, initialised",
        "heap_release": {
            "words_between": args.words_between_checks,
            "min_growth_bytes": runs[0]["heap_release_growth_bytes"],
            "mmap_threshold_bytes": PARSING_MMAP_THRESHOLD_BYTES,
        },
        "runs": runs,
        "peak_rss_growth": growth(released),
        "words_per_second_ratio": round(largest["words_per_second"] / smallest["words_per_second"], 3),
        "speed_check": run_child("--speed-child", str(args.speed_pairs), *common),
        "bytes_kept_per_doc": kept_per_doc(args.batch_size, args.model),
    }
    unreleased = [run for run in runs if not run["heap_release"]]
    if len(unreleased) > 1:
        result["peak_rss_growth_without_release"] = growth(unreleased)
    if "jemalloc" in allocators:
        jemalloc_runs = [run_child("--child", str(size), *common, allocator="jemalloc") for size in sizes]
        result["jemalloc"] = {
            "version": jemalloc_runs[0]["allocator"],
            "heap_release_growth_bytes": jemalloc_runs[0]["heap_release_growth_bytes"],
            "runs": jemalloc_runs,
            "peak_rss_growth": growth(jemalloc_runs),
            "speed_check": allocator_speed_check(args.speed_pairs // 2, common),
        }
    result["provenance"] = provenance(seed=None)
    print(write_json(args.output, result))


if __name__ == "__main__":
    code_at_start()  # the checkout as the run starts: what its results record
    main()
