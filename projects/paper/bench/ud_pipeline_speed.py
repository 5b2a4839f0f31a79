"""Words/s of whole UD pipelines on raw text: EWT test as `parse` reads ud-text's file (a paragraph
a Doc, tokenised by each pipeline's own tokenizer), every component running, timed in turns.

A new sentence segmenter may cost the whole pipeline at most 5% of its words/s (issue 54), so the
pipelines are timed against each other on one machine in one process: after an untimed pass each,
`--repeats` rounds time each pipeline once in turn (the order reversed every other round), and the
medians give each one's words/s and its ratio to the first (the reference). The machine's speed
drifts between rounds, so each round's own ratio is kept too (paired: the reference's seconds over
the pipeline's in that round); the bar applies to the `--judged` ones and is met only where both
medians reach it. Words are the gold file's syntactic words.

    python bench/ud_pipeline_speed.py --pipeline reference=training/ud_pipeline_segmented_docs10 \
        --pipeline shipped=training/ud_pipeline_segmented --output results/bench_ud_pipeline_speed.json
"""

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List

import spacy
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from spacy_pairatt.corpora.ud_documents import raw_text  # noqa: E402
from spacy_pairatt.evaluation.segmentation import source_doc  # noqa: E402
from spacy_pairatt.evaluation.ud_treebank import load_conllu  # noqa: E402
from spacy_pairatt.reporting.json_files import write_json  # noqa: E402
from spacy_pairatt.reporting.provenance import code_at_start, provenance  # noqa: E402


def named_path(value: str):
    name, separator, path = value.partition("=")
    if not separator or not name or not path:
        raise argparse.ArgumentTypeError(f"{value!r} is not NAME=PATH")
    return name, path


def timed_pass(nlp, texts: List[str], batch_size: int) -> float:
    """Seconds to tokenise and run every component over the texts, a paragraph a Doc."""
    begin = time.perf_counter()
    docs = (source_doc(nlp, number, text) for number, text in enumerate(texts, 1))
    for _ in nlp.pipe(docs, batch_size=batch_size):
        pass
    return time.perf_counter() - begin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipeline", type=named_path, action="append", required=True, metavar="NAME=PATH",
                        help="a pipeline to time; the first is the reference of the ratios")
    parser.add_argument("--judged", nargs="+", metavar="NAME",
                        help="the pipelines the bar applies to (default: every one after the first); others are "
                             "timed for comparison")
    parser.add_argument("--gold", default="assets/ud_ewt/en_ewt-ud-test.conllu")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--output", default="results/bench_ud_pipeline_speed.json")
    args = parser.parse_args()
    names = [name for name, _ in args.pipeline]
    judged = args.judged or names[1:]
    if not set(judged) <= set(names[1:]):
        parser.error(f"--judged names pipelines after the first (the reference): {names[1:]}, got {judged}")
    started = time.time()
    lines = Path(args.gold).read_text(encoding="utf8").splitlines()
    texts = [line for line in raw_text(lines).splitlines() if line]
    n_words = len(load_conllu(args.gold))
    pipelines = {name: spacy.load(path) for name, path in args.pipeline}
    for nlp in pipelines.values():
        timed_pass(nlp, texts, args.batch_size)  # untimed: first-call allocations and caches
    seconds: Dict[str, List[float]] = {name: [] for name in pipelines}
    for round_number in range(args.repeats):
        order = list(pipelines) if round_number % 2 == 0 else list(pipelines)[::-1]  # A B, B A: no seat favoured
        for name in order:
            seconds[name].append(timed_pass(pipelines[name], texts, args.batch_size))
    speed = {name: round(n_words / statistics.median(times), 1) for name, times in seconds.items()}
    reference = next(iter(speed))
    paired = {name: [round(r / t, 3) for r, t in zip(seconds[reference], times)] for name, times in seconds.items()}
    write_json(
        Path(args.output),
        {
            "gold": args.gold,
            "pipelines": dict(args.pipeline),
            "words": n_words,
            "paragraphs": len(texts),
            "torch_threads": torch.get_num_threads(),
            "batch_size": args.batch_size,
            "seconds": seconds,
            "words_per_second": speed,
            "ratio_to_reference": {name: round(value / speed[reference], 3) for name, value in speed.items()},
            "paired_ratios": paired,
            "median_paired_ratio": {name: round(statistics.median(ratios), 3) for name, ratios in paired.items()},
            "judged": judged,
            "provenance": provenance(started=started),
        },
    )
    for name, value in speed.items():
        ratio = statistics.median(paired[name])
        print(f"{name}: {value:,.0f} words/s ({value / speed[reference]:.3f} of {reference}; paired {ratio:.3f})")


if __name__ == "__main__":
    code_at_start()  # the checkout as the run starts: what its results record
    main()
