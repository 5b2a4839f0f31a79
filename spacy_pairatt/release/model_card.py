"""The end of the shipped model card (`packaging.assemble_pipeline`): data and licence, what was measured
and the limits, from the same results and limits as the docs."""

from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..evaluation.parser_eval import percent
from ..evaluation.ud_eval import f1_percent
from .blocks import BENCH_FILES, COMPARE_ROWS, SEGMENTATION_ROWS
from .limits import limits_block
from .results import Results, source_note
from .ud_blocks import UD_KIND, UD_PIPELINE_DEV_DOCS, ud_pipeline_file

MODEL_CARD_INTRO = """### Training data and licence

Trained on the train split of UD English-EWT 2.16 (the English Web Treebank: weblogs, newsgroups, emails,
reviews and question-answer posts), which is licensed CC BY-SA 4.0; the pipeline is shared under the same
terms (attribution, share-alike). The encoder is fine-tuned from all-MiniLM-L6-v2 (Apache 2.0). The accuracy
above is measured on EWT's test split with one gold sentence per Doc and spaCy's tokenization of the raw text,
so its sentence scores are 100 by construction.
"""


ACCURACY_METRICS = (("UAS", "dep_uas"), ("LAS", "dep_las"), ("one tree per sentence", "dep_single_tree"))
RAW_TEXT_METRICS = (("UAS", "dep_uas"), ("LAS", "dep_las"), ("sentence F", "sents_f"))


def accuracy_line(result: Optional[Dict], what: str, metrics: Sequence[Tuple[str, str]]) -> Optional[str]:
    if result is None:
        return None
    return f"- {what}: " + ", ".join(f"{label} {percent(result['scores'].get(key))}" for label, key in metrics) + "."


# Components that make a shipped pipeline the whole UD pipeline (configs/pipeline_minilm.cfg), whose
# figures come from `spacy project run ud-pipeline` rather than the parser-alone `compare`.
UD_COMPONENTS = frozenset({"tagger", "morphologizer", "trainable_lemmatizer"})
UD_GOLD_TOKEN_METRICS = ("UPOS", "XPOS", "UFeats", "Lemmas", "UAS", "LAS")
UD_RAW_TEXT_METRICS = ("Tokens", "Words", "Sentences", "UPOS", "Lemmas", "UAS", "LAS", "MLAS", "BLEX")


def ud_line(result: Optional[Dict], what: str, metrics: Sequence[str]) -> Optional[str]:
    if result is None:
        return None
    return (
        f"- {what} (CoNLL 2018 metrics, F1): "
        + ", ".join(f"{metric} {f1_percent(result, metric):.1f}" for metric in metrics)
        + "."
    )


def accuracy_lines(results: Results, ud_pipeline: bool) -> Tuple[List[Optional[str]], List[Tuple[str, str]]]:
    """The accuracy lines of the shipped pipeline, and their (results file, kind)."""
    if ud_pipeline:
        gold, raw, docs = (
            ud_pipeline_file("test", "gold_tokens"),
            ud_pipeline_file("test", "raw_text"),
            UD_PIPELINE_DEV_DOCS,
        )
        lines = [
            ud_line(results.json(gold), "EWT test, gold tokens and sentences", UD_GOLD_TOKEN_METRICS),
            ud_line(results.json(raw), "EWT test from raw text", UD_RAW_TEXT_METRICS),
            accuracy_line(
                results.json(docs), "EWT dev as raw Docs of 10 sentences, its own sentences", RAW_TEXT_METRICS
            ),
        ]
        return lines, [(gold, UD_KIND), (raw, UD_KIND), (docs, UD_KIND)]
    test, docs = COMPARE_ROWS[2][2], SEGMENTATION_ROWS[1][2]
    lines = [
        accuracy_line(
            results.json(test), "EWT test, one gold sentence per Doc (punctuation excluded)", ACCURACY_METRICS
        ),
        accuracy_line(
            results.json(docs), "EWT dev as raw Docs of 10 sentences, segmented by the senter", RAW_TEXT_METRICS
        ),
    ]
    return lines, [(test, "parser"), (docs, "parser")]


def measured_lines(results: Results, ud_pipeline: bool = False) -> List[str]:
    """Accuracy, accuracy on raw text, speed ratios and memory, each with its source."""
    lines, sources = accuracy_lines(results, ud_pipeline)
    lines = [line for line in lines if line]
    speed = results.json("results/bench_speed.json")
    if speed is not None:
        inference = speed["inference"]
        lines.append(
            f"- Speed ratios (bench/speed.py): transformer + parser / transformer alone "
            f"{inference['ratio_b_over_a']:.2f}; against the transition parser on the same encoder "
            f"{inference['ratio_b_over_c']:.2f} (stock transformer component) and "
            f"{inference['ratio_b_over_c_wordpiece_batched']:.2f} (the same wordpiece batching)."
        )
    memory = results.json("results/bench_memory.json")
    if memory is not None:
        lines.append(
            f"- Memory (bench/memory.py): peak RSS over {memory['runs'][-1]['sentences']:,} sentences "
            f"{100 * memory['peak_rss_growth']:+.1f}% against {memory['runs'][0]['sentences']:,}; a parsed Doc "
            f"keeps {memory['bytes_kept_per_doc']['release'] / 1e3:,.0f} kB with `pairatt_release_attention`."
        )
    command = "ud-pipeline" if ud_pipeline else "all"
    return lines + [
        "",
        source_note(
            results,
            [*sources, *BENCH_FILES],
            f"python -m spacy project run {command} && python -m spacy project run bench",
        ),
    ]


def model_card_notes(results_root: Path = Path("."), pipe_names: Sequence[str] = ()) -> str:
    """The end of the shipped model card: data and licence, what was measured, and the limits the docs state.

    pipe_names: the shipped components; with a tagger, morphologizer or lemmatizer the figures are the
    UD pipeline's, else the parser's."""
    results = Results(results_root)
    ud_pipeline = bool(UD_COMPONENTS & set(pipe_names))
    parts = [
        MODEL_CARD_INTRO,
        "### Measured\n",
        "\n".join(measured_lines(results, ud_pipeline=ud_pipeline)),
        "### Limits\n",
        limits_block(results, ud_pipeline),
    ]
    return "\n".join(parts)
