"""Memory benchmark: peak RSS of nlp.pipe over streams of EWT sentences (`--sizes`: 2,000 and 20,000 by
default; bench-memory adds 50,000).

Each size runs in a fresh process: the pairatt pipeline with `pairatt_release_attention` after
the parser, over EWT sentences (train, dev, test, cycled), streamed through `nlp.pipe` as a user
parsing a large corpus would. RSS is sampled every 50 Docs while parsing; the process peak also
counts building the pipeline. The components hand free heap back as they parse
(`integration/memory.py`, HEAP_RELEASE); `--compare-without-release` adds each size with that off.

What the bound costs in speed, measured in one fresh process so that the machine's load falls
on both alike: blocks of the same 30,000 words of sentences, off and on in turn, words/s of each.
On: as the components run (large arrays mapped, a release once RSS has grown); off: no release and
glibc's mmap threshold at its ceiling, where its own rising threshold ends in a long parse. Also what one
parsed Doc keeps with and without the release component, for users who hold on to their Docs.

    python bench/memory.py --model training/pairatt/model-best --sizes 2000,20000,50000 \
        --output results/bench_memory.json
"""

import argparse
import itertools
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List

import numpy as np
import spacy
from pipelines import build_pipeline, load_docs, unannotated
from spacy.tokens import Doc

from spacy_pairatt.integration.memory import GLIBC_MMAP_THRESHOLD_MAX, HEAP_RELEASE, heap_usage
from spacy_pairatt.json_files import write_json
from spacy_pairatt.provenance import provenance

CORPUS = tuple(f"corpus/ud_ewt/en_ewt-ud-{split}.spacy" for split in ("train", "dev", "test"))
SPEED_BLOCK_WORDS = 30_000


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


def pipeline(model: str, release: bool = True):
    """The trained pipeline at `model`, or (empty) one initialised from configs/parser_minilm.cfg;
    with `pairatt_release_attention` at the end when release."""
    if model:
        nlp = spacy.load(model)
    else:
        nlp = build_pipeline("parser_minilm", Path(CORPUS[0]))
    if release and "pairatt_release_attention" not in nlp.pipe_names:
        nlp.add_pipe("pairatt_release_attention")
    if not release and "pairatt_release_attention" in nlp.pipe_names:
        nlp.remove_pipe("pairatt_release_attention")
    return nlp


def child(n: int, heap_release: bool, batch_size: int, model: str) -> Dict:
    nlp = pipeline(model)
    if not heap_release:
        HEAP_RELEASE.words_between = 0
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
        # which checkpoint of a trained model ran (spacy train rewrites model-best as it improves)
        "model_dev_las": nlp.meta.get("performance", {}).get("dep_las") if model else None,
        "release_component": True,
        "heap_release": heap_release,
        "heap_releases": HEAP_RELEASE.releases,
        "heap_release_seconds": round(HEAP_RELEASE.seconds, 3),
        # glibc's heap once the stream is parsed: in use (live data) against free (kept by glibc)
        **{f"heap_{kind}_mb_at_end": round(size / 2**20, 1) for kind, size in heap.items()},
        "rss_mb_before_parsing": round(before, 1),
        "peak_rss_mb_while_parsing": round(parsing_peak, 1),
        "peak_rss_mb_process": round(peak_rss_mb(), 1),
        "seconds": round(seconds, 1),
        "words_per_second": round(n_words / seconds, 1),
    }


def on_over_off(speeds: Dict[str, List[float]]) -> float:
    """Mean speed with the bound on over mean speed with it off (ABBA blocks: a linear drift cancels)."""
    return float(np.mean(speeds["on"]) / np.mean(speeds["off"]))


def speed_child(pairs: int, batch_size: int, model: str) -> Dict:
    """words/s of the same block of sentences with the heap release off and on in turn (see the docstring)."""
    nlp = pipeline(model)
    gold = load_docs(Path(CORPUS[1]), nlp)
    block, n_words = [], 0
    for doc in itertools.cycle(gold):  # long enough for the releases of a steady stream
        block.append(doc)
        n_words += len(doc)
        if n_words >= SPEED_BLOCK_WORDS:
            break
    list(nlp.pipe(unannotated(block[:64]), batch_size=batch_size))  # warm-up
    words_between = HEAP_RELEASE.words_between
    speeds: Dict[str, List[float]] = {"off": [], "on": []}
    cpu_speeds: Dict[str, List[float]] = {"off": [], "on": []}  # per CPU second: what other work on the machine takes
    releases = []
    for pair in range(pairs):
        for setting in ("off", "on") if pair % 2 == 0 else ("on", "off"):  # ABBA: a drift in speed cancels
            # off: glibc's defaults as a long parse leaves them (its mmap threshold at its ceiling)
            HEAP_RELEASE.words_between = words_between if setting == "on" else 0
            HEAP_RELEASE.set_mmap_threshold(
                HEAP_RELEASE.mmap_threshold_bytes if setting == "on" else GLIBC_MMAP_THRESHOLD_MAX
            )
            HEAP_RELEASE.words, before = 0, HEAP_RELEASE.releases
            start, cpu_start = time.perf_counter(), time.process_time()
            for _ in nlp.pipe(unannotated(block), batch_size=batch_size):
                pass
            speeds[setting].append(n_words / (time.perf_counter() - start))
            cpu_speeds[setting].append(n_words / (time.process_time() - cpu_start))
            if setting == "on":
                releases.append(HEAP_RELEASE.releases - before)
    wall_ratio, cpu_ratio = on_over_off(speeds), on_over_off(cpu_speeds)
    return {
        "block_sentences": len(block),
        "block_words": n_words,
        "words_between_releases": words_between,
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


def run_child(*options: str) -> Dict:
    command = [sys.executable, __file__, *options]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result = json.loads(output.strip().splitlines()[-1])
    print(result, flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2000,20000")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--model", default="", help="a trained pipeline (default: parser_minilm.cfg, initialised)")
    parser.add_argument("--speed-pairs", type=int, default=8, help="off/on block pairs of the speed check")
    parser.add_argument("--compare-without-release", action="store_true", help="each size again, heap release off")
    parser.add_argument("--release-words", type=int, help="words between heap releases (default: the components')")
    parser.add_argument("--release-growth-mb", type=int, help="RSS growth in MB that triggers a release")
    parser.add_argument("--output", default="results/bench_memory.json")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--speed-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--no-heap-release", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.release_words:
        HEAP_RELEASE.words_between = args.release_words
    if args.release_growth_mb:
        HEAP_RELEASE.min_growth_bytes = args.release_growth_mb * 2**20
    if args.child:
        print(json.dumps(child(args.child, not args.no_heap_release, args.batch_size, args.model)))
        return
    if args.speed_child:
        print(json.dumps(speed_child(args.speed_child, args.batch_size, args.model)))
        return
    common = [
        "--batch-size",
        str(args.batch_size),
        "--model",
        args.model,
        "--release-words",
        str(HEAP_RELEASE.words_between),
        "--release-growth-mb",
        str(HEAP_RELEASE.min_growth_bytes // 2**20),
    ]
    runs: List[Dict] = []
    for size in (int(s) for s in args.sizes.split(",")):
        runs.append(run_child("--child", str(size), *common))
        if args.compare_without_release:
            runs.append(run_child("--child", str(size), "--no-heap-release", *common))
    released = [run for run in runs if run["heap_release"]]
    smallest, largest = released[0], released[-1]
    result = {
        "model": args.model or "configs/parser_minilm.cfg, initialised",
        "heap_release": {
            "words_between": HEAP_RELEASE.words_between,
            "min_growth_bytes": HEAP_RELEASE.min_growth_bytes,
            "mmap_threshold_bytes": HEAP_RELEASE.mmap_threshold_bytes,
        },
        "runs": runs,
        "peak_rss_growth": round(largest["peak_rss_mb_while_parsing"] / smallest["peak_rss_mb_while_parsing"] - 1, 4),
        "words_per_second_ratio": round(largest["words_per_second"] / smallest["words_per_second"], 3),
        "speed_check": run_child("--speed-child", str(args.speed_pairs), *common),
        "bytes_kept_per_doc": kept_per_doc(args.batch_size, args.model),
    }
    unreleased = [run for run in runs if not run["heap_release"]]
    if len(unreleased) > 1:
        result["peak_rss_growth_without_release"] = round(
            unreleased[-1]["peak_rss_mb_while_parsing"] / unreleased[0]["peak_rss_mb_while_parsing"] - 1, 4
        )
    result["provenance"] = provenance(seed=None)
    print(write_json(args.output, result))


if __name__ == "__main__":
    main()
