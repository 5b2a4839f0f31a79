"""float32 against bfloat16: words/s of the same pipelines, and seconds per training step, in turns.

Each pipeline is loaded twice with the same weights, its transformers in float32 and in bfloat16
(`layers/precision.py`, a load-time override), and both parse EWT test (gold tokens, one sentence
per Doc; a `--text-pipeline` reads the raw paragraphs instead, as `parse` does). After an untimed
pass each, `--repeats` rounds time the two in turn, the order reversed every other round; each
round's own ratio (float32 seconds over bfloat16's) is kept, since the machine's speed drifts
between rounds, and the median of those paired ratios is the pipeline's speedup, beside the ratio
of the medians. A SOURCE is a saved pipeline or a config (`configs/X.cfg`), built and initialised
on EWT train, untrained: speed does not depend on the weights. With `--split`, the transformer alone
is timed too, so what the parser itself gains (or not) shows. `--train-config` times `nlp.update`
on `--train-batch` training sentences the same way (a fresh pipeline per precision, same seed).

    python bench/precision.py --pipeline minilm=configs/parser_minilm.cfg \
        --pipeline mpnet=configs/parser_mpnet.cfg --train-config parser_mpnet --output results/bench_precision.json
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

import spacy
import torch
from pipelines import build_pipeline, load_docs, unannotated
from spacy.training import Example
from spacy.util import fix_random_seed, load_config
from ud_pipeline_speed import named_path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from spacy_pairatt.corpora.ud_documents import raw_text  # noqa: E402
from spacy_pairatt.evaluation.segmentation import source_doc  # noqa: E402
from spacy_pairatt.layers.precision import cpu_has_native_bfloat16, precision_overrides  # noqa: E402
from spacy_pairatt.reporting.json_files import write_json  # noqa: E402
from spacy_pairatt.reporting.provenance import code_at_start, provenance  # noqa: E402

PRECISIONS = ("float32", "bfloat16")


def saved_pipeline(source: str, train_path: Path, scratch: Path) -> Path:
    """`source` if it is a saved pipeline, else the config built, initialised and saved in `scratch`."""
    if not source.endswith(".cfg"):
        return Path(source)
    target = scratch / Path(source).stem
    build_pipeline(Path(source).stem, train_path).to_disk(target)
    return target


def raw_paragraphs(conllu: Path) -> List[str]:
    """A CoNLL-U file's raw text (its `# text` lines), one string a paragraph, as `parse` reads ud-text's file."""
    return [line for line in raw_text(conllu.read_text(encoding="utf8").splitlines()).splitlines() if line]


def in_turns(runs: Dict[str, Callable[[], float]], repeats: int) -> Dict[str, List[float]]:
    """Each run's seconds over `repeats` rounds, the order reversed every other round."""
    seconds: Dict[str, List[float]] = {name: [] for name in runs}
    for round_number in range(repeats):
        order = list(runs) if round_number % 2 == 0 else list(runs)[::-1]
        for name in order:
            seconds[name].append(runs[name]())
    return seconds


def speedup(seconds: Dict[str, List[float]], units: float) -> Dict:
    """Per-second rates of both precisions, the ratio of their medians and the median paired ratio."""
    paired = [round(f / b, 3) for f, b in zip(seconds["float32"], seconds["bfloat16"])]
    rate = {name: round(units / statistics.median(times), 2) for name, times in seconds.items()}
    return {
        "seconds": seconds,
        "per_second": rate,
        "ratio_of_medians": round(rate["bfloat16"] / rate["float32"], 3),
        "paired_ratios": paired,
        "median_paired_ratio": round(statistics.median(paired), 3),
    }


def time_parsing(path: Path, texts: List[str], docs, text_input: bool, split: bool, repeats: int, batch_size: int):
    """Words/s of the pipeline at `path` in both precisions (and of its transformer alone with `split`):
    over `texts` (all of test) with `text_input`, else over `docs`."""
    config = load_config(path / "config.cfg")
    pipelines = {p: spacy.load(path, config=precision_overrides(config, p)) for p in PRECISIONS}

    def parse(nlp, only_transformer: bool = False) -> float:
        begin = time.perf_counter()
        inputs = (
            (source_doc(nlp, n, text) for n, text in enumerate(texts, 1))
            if text_input
            else unannotated(docs, nlp.vocab)
        )
        if only_transformer:
            with nlp.select_pipes(enable=[name for name, _ in nlp.pipeline if "transformer" in name]):
                list(nlp.pipe(inputs, batch_size=batch_size))
        else:
            list(nlp.pipe(inputs, batch_size=batch_size))
        return time.perf_counter() - begin

    for nlp in pipelines.values():
        parse(nlp)  # untimed: first-call allocations and caches
    n_words = sum(len(doc) for doc in docs)
    result = speedup(in_turns({p: lambda nlp=nlp: parse(nlp) for p, nlp in pipelines.items()}, repeats), n_words)
    if split:
        alone = in_turns({p: lambda nlp=nlp: parse(nlp, True) for p, nlp in pipelines.items()}, repeats)
        result["transformer_alone"] = speedup(alone, n_words)
        result["rest_seconds"] = {
            p: round(statistics.median(result["seconds"][p]) - statistics.median(alone[p]), 2) for p in PRECISIONS
        }
    return result


def time_training(config_name: str, train_path: Path, batch: int, repeats: int) -> Dict:
    """Seconds per `nlp.update` on `batch` training sentences in both precisions (same seed, same
    initial weights), as `spacy train` runs it (the config's before_init included)."""
    steps = {}
    for precision in PRECISIONS:
        fix_random_seed(0)
        nlp = build_pipeline(config_name, train_path, training=True, precision=precision)
        gold = load_docs(train_path, nlp, batch)
        examples = [Example(p, r) for p, r in zip(unannotated(gold), gold)]
        optimizer = nlp.resume_training()

        def step(nlp=nlp, examples=examples, optimizer=optimizer) -> float:
            begin = time.perf_counter()
            nlp.update(examples, sgd=optimizer, losses={})
            return time.perf_counter() - begin

        step()  # untimed
        steps[precision] = step
    return speedup(in_turns(steps, repeats), 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--pipeline",
        type=named_path,
        action="append",
        default=[],
        metavar="NAME=SOURCE",
        help="a pipeline (or configs/X.cfg) timed on EWT test's gold-token sentences",
    )
    parser.add_argument(
        "--text-pipeline",
        type=named_path,
        action="append",
        default=[],
        metavar="NAME=SOURCE",
        help="a pipeline timed on EWT test's raw paragraphs (its own tokenizer and segmenter)",
    )
    parser.add_argument(
        "--split", nargs="*", default=[], metavar="NAME", help="pipelines whose transformer is also timed alone"
    )
    parser.add_argument(
        "--train-config", nargs="*", default=[], metavar="CONFIG", help="configs whose training step is timed"
    )
    parser.add_argument("--train-batch", type=int, default=16)
    parser.add_argument("--train-repeats", type=int, default=6)
    parser.add_argument("--test", default="corpus/ud_ewt/en_ewt-ud-test.spacy")
    parser.add_argument("--test-conllu", default="assets/ud_ewt/en_ewt-ud-test.conllu")
    parser.add_argument("--train", default="corpus/ud_ewt/en_ewt-ud-train.spacy")
    parser.add_argument("--limit", type=int, default=0, help="time the first LIMIT sentences only (0: all)")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--output", default="results/bench_precision.json")
    args = parser.parse_args()
    if not (args.pipeline or args.text_pipeline or args.train_config):
        parser.error("nothing to time: give --pipeline, --text-pipeline or --train-config")
    started = time.time()
    all_docs = load_docs(Path(args.test), spacy.blank("en"))
    docs = all_docs[: args.limit] if args.limit else all_docs
    texts = raw_paragraphs(Path(args.test_conllu))
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for text_input, named in ((False, args.pipeline), (True, args.text_pipeline)):
            for name, source in named:
                path = saved_pipeline(source, Path(args.train), Path(scratch))
                results[name] = {
                    "source": source,
                    "input": "raw paragraphs" if text_input else "gold-token sentences",
                    **time_parsing(
                        path,
                        texts,
                        all_docs if text_input else docs,
                        text_input,
                        name in args.split,
                        args.repeats,
                        args.batch_size,
                    ),
                }
                rates, paired = results[name]["per_second"], results[name]["median_paired_ratio"]
                print(f"{name}: {rates} words/s, bfloat16 {paired}x (paired)")
    training = {}
    for config_name in args.train_config:
        training[config_name] = time_training(config_name, Path(args.train), args.train_batch, args.train_repeats)
        print(f"training {config_name}: {training[config_name]['median_paired_ratio']}x (paired)")
    write_json(
        Path(args.output),
        {
            "test": args.test,
            "words": sum(len(doc) for doc in docs),
            "limit": args.limit,
            "torch_threads": torch.get_num_threads(),
            "native_bfloat16": cpu_has_native_bfloat16(),
            "cpu_features": {k: v for k, v in torch.cpu.get_capabilities().items() if "bf16" in k},
            "batch_size": args.batch_size,
            "repeats": args.repeats,
            "parsing": results,
            "training_step": {"batch_sentences": args.train_batch, "repeats": args.train_repeats, **training},
            "provenance": provenance(started=started),
        },
    )


if __name__ == "__main__":
    code_at_start()  # the checkout as the run starts: what its results record
    main()
