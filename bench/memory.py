"""Memory benchmark (issue 4): peak RSS of nlp.pipe over 2,000 and 20,000 sentences.

Each size runs in a fresh process: the pairatt pipeline with `pairatt_release_attention` after
the parser, over EWT sentences (train, dev, test, cycled), streamed through `nlp.pipe` as a user
parsing a large corpus would. RSS is sampled every 50 Docs while parsing; the process peak also
counts building the pipeline. Also what one parsed Doc
keeps with and without the release component, for users who hold on to their Docs.

    python bench/memory.py --output results/bench_memory.json
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
from pipelines import build_pipeline, load_docs, unannotated
from spacy.tokens import Doc

from spacy_pairatt.json_files import write_json
from spacy_pairatt.provenance import provenance

CORPUS = tuple(f"corpus/ud_ewt/en_ewt-ud-{split}.spacy" for split in ("train", "dev", "test"))


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


def child(n: int, release: bool, batch_size: int) -> Dict:
    nlp = build_pipeline("parser_minilm", Path(CORPUS[0]))
    if release:
        nlp.add_pipe("pairatt_release_attention")
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
    return {
        "sentences": n,
        "release_component": release,
        "rss_mb_before_parsing": round(before, 1),
        "peak_rss_mb_while_parsing": round(parsing_peak, 1),
        "peak_rss_mb_process": round(peak_rss_mb(), 1),
        "seconds": round(seconds, 1),
        "words_per_second": round(n_words / seconds, 1),
    }


def kept_per_doc(batch_size: int, n_docs: int = 200) -> Dict:
    """Mean bytes a parsed Doc keeps (transformer output + word-level attention) per pipeline variant."""
    results = {}
    base = build_pipeline("parser_minilm", Path(CORPUS[0]))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2000,20000")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--output", default="results/bench_memory.json")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--no-release", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, not args.no_release, args.batch_size)))
        return
    runs: List[Dict] = []
    for size in (int(s) for s in args.sizes.split(",")):
        command = [sys.executable, __file__, "--child", str(size), "--batch-size", str(args.batch_size)]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        runs.append(json.loads(output.strip().splitlines()[-1]))
        print(runs[-1], flush=True)
    smallest, largest = runs[0], runs[-1]
    result = {
        "runs": runs,
        "peak_rss_growth": round(largest["peak_rss_mb_while_parsing"] / smallest["peak_rss_mb_while_parsing"] - 1, 4),
        "words_per_second_ratio": round(largest["words_per_second"] / smallest["words_per_second"], 3),
        "bytes_kept_per_doc": kept_per_doc(args.batch_size),
    }
    result["provenance"] = provenance(seed=None)
    print(write_json(args.output, result))


if __name__ == "__main__":
    main()
