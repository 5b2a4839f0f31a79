"""Speed benchmark: inference words/s, training step time, MST share of parse time.

In one process, on the UD EWT test sentences (gold tokens, one sentence per Doc):
  (a) the transformer alone, (b) transformer + pairatt_parser (storing its confidence, the default;
  also timed storing none and storing the marginal matrices), (c) transformer + spaCy's
  transition parser on the same encoder as configs/transition_minilm.cfg has it (stock
  `transformer` component, SDPA attention, no attention output), and (c') the same with the
  `pairatt_transformer` component's batching; interleaved per repeat; median words/s.
(a0), (a) with Hugging Face's own eager self-attention instead of the fused one
(`layers/fused_attention.py`), runs in the same loop: what the fused attention gains.
Training: one `nlp.update` on 32 training sentences, pairatt_parser vs a tagger head on the same
transformer, interleaved; median seconds per step. It runs last: building the tagger from its
config bounds the process's heap as `spacy train` does (`integration/memory.py`), which would slow
everything timed after it.
MST: the time spent in `decode_batch` while (b) parses the test set, measured by wrapping it,
as a share of (b)'s total time and of the parser component's own time; plus a cProfile summary.
Threads (CPU only): the transformer's and the parser's seconds per pass, batch by batch, with one
torch thread and with the machine's default, interleaved; what b/a would be from those times. The
transformer's large matmuls scale with threads and the parser's many small operations much less.

    python bench/speed.py --output results/bench_speed.json
    python bench/speed.py --pairatt-model training/pairatt/model-best \
        --transition-model training/transition/model-best --output results/bench_speed.json   # trained
"""

import argparse
import cProfile
import pstats
import statistics
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, List

import spacy
import torch
from pipelines import build_pipeline, load_docs, load_or_build, unannotated
from spacy.training import Example
from thinc.api import NumpyOps, fix_random_seed, get_current_ops

import spacy_pairatt.components.parser as parser_module
from spacy_pairatt.core.decoding import decode_batch
from spacy_pairatt.layers.fused_attention import FUSED_CLASSES
from spacy_pairatt.reporting.json_files import write_json
from spacy_pairatt.reporting.provenance import code_at_start, provenance
from spacy_pairatt.reporting.tables import timed_apart_seconds


def words_per_second(run: Callable[[List], None], docs: List, n_words: int, vocab) -> float:
    fresh = unannotated(docs, vocab)
    start = time.perf_counter()
    run(fresh)
    return n_words / (time.perf_counter() - start)


def inference(pairatt, transition, transition_batched, docs, repeats: int, batch_size: int) -> Dict:
    n_words = sum(len(doc) for doc in docs)

    def transformer_alone(batch):
        with pairatt.select_pipes(enable=["transformer"]):
            list(pairatt.pipe(batch, batch_size=batch_size))

    def transformer_alone_hf_attention(batch):
        with hugging_face_attention(pairatt.get_pipe("transformer").model.transformer):
            transformer_alone(batch)

    def pairatt_storing(confidence: str):
        """(b) with the parser storing this much confidence on the Doc (`spacy_pairatt.integration.doc_confidence`)."""

        def run(batch):
            parser = pairatt.get_pipe("pairatt_parser")
            saved, parser.confidence = parser.confidence, confidence
            try:
                list(pairatt.pipe(batch, batch_size=batch_size))
            finally:
                parser.confidence = saved

        return run

    # Each run with its pipeline, whose vocab the Docs are made in.
    runs = {
        "a_transformer": (pairatt, transformer_alone),
        "a_transformer_hf_attention": (pairatt, transformer_alone_hf_attention),
        "b_pairatt": (pairatt, pairatt_storing("arcs")),
        "b_pairatt_confidence_none": (pairatt, pairatt_storing("none")),
        "b_pairatt_confidence_matrix": (pairatt, pairatt_storing("matrix")),
        "c_transition": (transition, lambda batch: list(transition.pipe(batch, batch_size=batch_size))),
        "c_transition_wordpiece_batched": (
            transition_batched,
            lambda batch: list(transition_batched.pipe(batch, batch_size=batch_size)),
        ),
    }
    for pipeline, run in runs.values():  # warm-up: first calls allocate and tune
        run(unannotated(docs[:64], pipeline.vocab))
    speeds: Dict[str, List[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, (pipeline, run) in runs.items():
            speeds[name].append(words_per_second(run, docs, n_words, pipeline.vocab))
    medians = {name: statistics.median(values) for name, values in speeds.items()}
    # Each repeat's b over that repeat's a: the machine's speed drifts between repeats
    # (this VM: the transformer alone from 1,978 to 2,958 words/s in one bench), less within one.
    paired = {
        name: [round(b / a, 3) for b, a in zip(speeds[name], speeds["a_transformer"])]
        for name in ("b_pairatt", "b_pairatt_confidence_none")
    }
    return {
        "n_sentences": len(docs),
        "n_words": n_words,
        "repeats": repeats,
        "batch_size": batch_size,
        "words_per_second": {name: [round(v, 1) for v in values] for name, values in speeds.items()},
        "median_words_per_second": {name: round(v, 1) for name, v in medians.items()},
        "ratio_b_over_a": round(medians["b_pairatt"] / medians["a_transformer"], 3),
        # b stores confidence = "arcs" (the default); these two: storing none, and the marginal matrices too
        "ratio_b_confidence_none_over_a": round(medians["b_pairatt_confidence_none"] / medians["a_transformer"], 3),
        "ratio_b_confidence_matrix_over_a": round(medians["b_pairatt_confidence_matrix"] / medians["a_transformer"], 3),
        "paired_ratios_over_a": paired,
        "median_paired_ratio_b_over_a": round(statistics.median(paired["b_pairatt"]), 3),
        "ratio_b_over_c": round(medians["b_pairatt"] / medians["c_transition"], 3),
        "ratio_b_over_c_wordpiece_batched": round(medians["b_pairatt"] / medians["c_transition_wordpiece_batched"], 3),
        "ratio_a_over_a_hf_attention": round(medians["a_transformer"] / medians["a_transformer_hf_attention"], 3),
    }


@contextmanager
def hugging_face_attention(encoder: torch.nn.Module):
    """The encoder's fused self-attention modules back to the Hugging Face classes they replace."""
    originals = {fused: original for original, fused in FUSED_CLASSES.items()}
    swapped = [module for module in encoder.modules() if type(module) in originals]
    for module in swapped:
        module.__class__ = originals[type(module)]
    try:
        yield
    finally:
        for module in swapped:
            module.__class__ = FUSED_CLASSES[type(module)]


def training_steps(pairatt, tagger, train_docs, steps: int, batch: int) -> Dict:
    """Median seconds of nlp.update on `batch` sentences, both pipelines on the same batches.

    The sentences must be among those the pipelines were initialised on (the tagger's tag set).
    """
    examples = [Example(p, r) for p, r in zip(unannotated(train_docs), train_docs)]
    timings: Dict[str, List[float]] = {"pairatt_parser": [], "tagger": []}
    pipelines = {"pairatt_parser": pairatt, "tagger": tagger}
    optimizers = {name: nlp.resume_training() for name, nlp in pipelines.items()}
    for step in range(steps + 2):
        chunk = examples[(step * batch) % len(examples) :][:batch]
        for name, nlp in pipelines.items():
            start = time.perf_counter()
            nlp.update(chunk, sgd=optimizers[name], drop=0.1)
            if step >= 2:  # the first two steps warm up
                timings[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(values) for name, values in timings.items()}
    return {
        "steps": steps,
        "batch_sentences": batch,
        "seconds_per_step": {name: [round(v, 3) for v in values] for name, values in timings.items()},
        "median_seconds_per_step": {name: round(v, 3) for name, v in medians.items()},
        "ratio_pairatt_over_tagger": round(medians["pairatt_parser"] / medians["tagger"], 3),
    }


def decoding_share(pairatt, docs, batch_size: int) -> Dict:
    """Seconds in decode_batch, in the parser component and in the whole pipeline over `docs`."""
    decoding = [0.0]

    def timed_decode(arcs, lengths, method):
        start = time.perf_counter()
        try:
            return decode_batch(arcs, lengths, method)
        finally:
            decoding[0] += time.perf_counter() - start

    parser = pairatt.get_pipe("pairatt_parser")
    parser_module.decode_batch = timed_decode
    try:
        fresh = unannotated(docs)
        start = time.perf_counter()
        transformed = list(pairatt.get_pipe("transformer").pipe(fresh, batch_size=batch_size))
        middle = time.perf_counter()
        list(parser.pipe(transformed, batch_size=batch_size))
        end = time.perf_counter()
    finally:
        parser_module.decode_batch = decode_batch
    component, total = end - middle, end - start
    return {
        "decoder": parser.decoder,
        "seconds_decoding": round(decoding[0], 3),
        "seconds_parser_component": round(component, 3),
        "seconds_pipeline": round(total, 3),
        "share_of_pipeline": round(decoding[0] / total, 4),
        "share_of_parser_component": round(decoding[0] / component, 4),
    }


def thread_scaling(pairatt, docs, batch_size: int, repeats: int) -> Dict:
    """Median seconds of the transformer and of the parser (predict and set_annotations) over `docs`,
    at one torch thread and at the default count, and transformer / (transformer + parser) for each."""
    default = torch.get_num_threads()
    transformer, parser = pairatt.get_pipe("transformer"), pairatt.get_pipe("pairatt_parser")
    seconds: Dict[int, Dict[str, List[float]]] = {n: {"transformer": [], "parser": []} for n in sorted({1, default})}
    try:
        for _ in range(repeats):
            for threads, timings in seconds.items():
                torch.set_num_threads(threads)
                fresh = unannotated(docs, pairatt.vocab)
                spent = {"transformer": 0.0, "parser": 0.0}
                for start in range(0, len(fresh), batch_size):
                    began = time.perf_counter()
                    batch = list(transformer.pipe(fresh[start : start + batch_size], batch_size=batch_size))
                    middle = time.perf_counter()
                    parser.set_annotations(batch, parser.predict(batch))
                    spent["transformer"] += middle - began
                    spent["parser"] += time.perf_counter() - middle
                for part, value in spent.items():
                    timings[part].append(round(value, 3))
    finally:
        torch.set_num_threads(default)
    result = {}
    for threads, timings in seconds.items():
        a, b = timed_apart_seconds(timings)
        result[str(threads)] = {**timings, "ratio_b_over_a": round(a / (a + b), 3)}
    return result


PROFILE_PARTS = {
    "transformer (spacy-transformers forward)": ("spacy_transformers/layers/transformer_model.py", "forward"),
    "windows in buckets (features.window_batch)": ("spacy_pairatt/layers/pair_batch.py", "window_batch"),
    "alignment indices (alignment.align_blocks)": ("spacy_pairatt/core/alignment.py", "align_blocks"),
    "pooling to words (torch, inside the arc scores)": ("spacy_pairatt/layers/torch_scorers.py", "pooled"),
    "pair scorer (arcs, pooling included)": ("spacy_pairatt/layers/pair_scorer.py", "biaffine_forward"),
    "pair scorer (labels on decoded arcs)": ("spacy_pairatt/layers/pair_scorer.py", "labels_at"),
    "MST decoding": ("spacy_pairatt/core/decoding.py", "decode_batch"),
    "set_annotations": ("spacy_pairatt/components/parser.py", "set_annotations"),
}


def profile_summary(pairatt, docs, batch_size: int) -> Dict:
    """Cumulative seconds of the main stages under cProfile (which slows Python code a little)."""
    profiler = cProfile.Profile()
    fresh = unannotated(docs)
    profiler.enable()
    list(pairatt.pipe(fresh, batch_size=batch_size))
    profiler.disable()
    stats = pstats.Stats(profiler).stats
    total = max(cumulative for (_, _, _, cumulative, _) in stats.values())
    parts = {}
    for label, (path, function) in PROFILE_PARTS.items():
        seen = [v[3] for (file, _, name), v in stats.items() if file.endswith(path) and name == function]
        if not seen:
            raise ValueError(f"PROFILE_PARTS: {path}:{function} ({label!r}) never ran; was it renamed?")
        parts[label] = round(sum(seen), 3)
    return {"seconds_total": round(total, 3), "seconds_cumulative": parts}


def machine_description() -> Dict:
    """Torch's CPU threads, and the GPU the pipelines run on when spaCy uses one."""
    description = {"torch_threads": torch.get_num_threads(), "gpu": None}
    if not isinstance(get_current_ops(), NumpyOps):  # CupyOps after require_gpu
        description["gpu"] = torch.cuda.get_device_name()
    return description


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", default="corpus/ud_ewt/en_ewt-ud-train.spacy")
    parser.add_argument("--test", default="corpus/ud_ewt/en_ewt-ud-test.spacy")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--train-steps", type=int, default=10)
    parser.add_argument("--limit", type=int, default=0, help="test sentences to use (0: all)")
    parser.add_argument("--output", default="results/bench_speed.json")
    parser.add_argument("--pairatt-model", help="a trained pairatt pipeline (default: parser_minilm.cfg initialised)")
    parser.add_argument(
        "--transition-model", help="a trained transition pipeline (default: transition_minilm.cfg initialised)"
    )
    parser.add_argument("--gpu-id", type=int, default=-1, help="GPU to run on (spaCy's require_gpu; -1: CPU)")
    args = parser.parse_args()

    if args.gpu_id >= 0:
        spacy.require_gpu(args.gpu_id)
    fix_random_seed(0)
    train = Path(args.train)
    pairatt = load_or_build(args.pairatt_model, "parser_minilm", train)
    transition = load_or_build(args.transition_model, "transition_minilm", train)
    transition_batched = load_or_build(
        args.transition_model, "transition_minilm", train, transformer_factory="pairatt_transformer"
    )
    docs = load_docs(Path(args.test), pairatt, args.limit)
    inference_speed = inference(pairatt, transition, transition_batched, docs, args.repeats, args.batch_size)
    threads = None if args.gpu_id >= 0 else thread_scaling(pairatt, docs, args.batch_size, 3)
    decoding = decoding_share(pairatt, docs, args.batch_size)
    profile = profile_summary(pairatt, docs, args.batch_size)
    # Last: the tagger's config bounds the heap for the rest of the process, as training does.
    tagger = build_pipeline("parser_minilm", train, head="tagger", training=True)
    training = training_steps(pairatt, tagger, load_docs(train, pairatt, 32 * 8), args.train_steps, 32)
    result = {
        "machine": machine_description(),
        "encoder": "all-MiniLM-L6-v2 (configs/parser_minilm.cfg, configs/transition_minilm.cfg)",
        "weights": (
            f"trained: {args.pairatt_model}, {args.transition_model or 'transition initialised'}"
            if args.pairatt_model
            else "initialised, not trained (speed does not depend on them; MST sees more cycles)"
        ),
        # The trained pipelines timed; null: built from its config, initialised.
        "models": {"pairatt_parser": args.pairatt_model, "transition": args.transition_model},
        "inference": inference_speed,
        "training": training,
        "decoding": decoding,
        "profile": profile,
    }
    if threads is not None:
        result["threads"] = threads
    if torch.cuda.is_available() and args.gpu_id >= 0:
        result["machine"]["gpu_peak_allocated_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    result["provenance"] = provenance(seed=0)
    print(write_json(args.output, result))


if __name__ == "__main__":
    code_at_start()  # the checkout as the run starts: what its results record
    main()
