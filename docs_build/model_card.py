"""The end of the shipped model card (`assemble --notes`, templates/model_card.md): data and licence, what was
measured and the limits, from the same results and limits as the docs."""

from pathlib import Path
from typing import Dict, List, Optional, Sequence

from spacy_pairatt.evaluation.ud_eval import f1_percent
from spacy_pairatt.reports import percent

from .blocks import BENCH_FILES, COMPARE_ROWS, SEGMENTATION_ROWS
from .limits import limits_block
from .results import Results, source_note
from .ud_blocks import UD_KIND, UD_PIPELINE_DEV_DOCS, ud_pipeline_file

TEMPLATE = Path(__file__).parent / "templates" / "model_card.md"
ACCURACY = (("UAS", "dep_uas"), ("LAS", "dep_las"), ("one tree per sentence", "dep_single_tree"))
RAW_TEXT = (("UAS", "dep_uas"), ("LAS", "dep_las"), ("sentence F", "sents_f"))
UD_GOLD_TOKENS = ("UPOS", "XPOS", "UFeats", "Lemmas", "UAS", "LAS")
UD_RAW_TEXT = ("Tokens", "Words", "Sentences", "UPOS", "Lemmas", "UAS", "LAS", "MLAS", "BLEX")
# (what, results file, result kind, metrics: (label, spaCy score key) or CoNLL 2018 names) of each accuracy line.
ACCURACY_LINES = {
    True: (
        ("EWT test, gold tokens and sentences", ud_pipeline_file("test", "gold_tokens"), UD_KIND, UD_GOLD_TOKENS),
        ("EWT test from raw text", ud_pipeline_file("test", "raw_text"), UD_KIND, UD_RAW_TEXT),
        ("EWT dev as raw Docs of 10 sentences, its own sentences", UD_PIPELINE_DEV_DOCS, UD_KIND, RAW_TEXT),
    ),
    False: (
        ("EWT test, one gold sentence per Doc (punctuation excluded)", COMPARE_ROWS[2][2], "parser", ACCURACY),
        ("EWT dev as raw Docs of 10 sentences, segmented by the senter", SEGMENTATION_ROWS[1][2], "parser", RAW_TEXT),
    ),
}


def accuracy_line(result: Optional[Dict], what: str, metrics: Sequence) -> Optional[str]:
    if result is None:
        return None
    if isinstance(metrics[0], str):  # CoNLL 2018 metrics of ud-eval
        figures = ", ".join(f"{metric} {f1_percent(result, metric):.1f}" for metric in metrics)
        return f"- {what} (CoNLL 2018 metrics, F1): {figures}."
    return f"- {what}: " + ", ".join(f"{label} {percent(result['scores'].get(key))}" for label, key in metrics) + "."


def measured_lines(results: Results, ud_pipeline: bool = False) -> List[str]:
    """Accuracy, accuracy on raw text, speed ratios and memory, with their source."""
    rows = ACCURACY_LINES[ud_pipeline]
    lines = [accuracy_line(results.json(path), what, metrics) for what, path, _, metrics in rows]
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
    sources = [(path, kind) for _, path, kind, _ in rows] + list(BENCH_FILES)
    command = (
        f"python -m spacy project run {'ud-pipeline' if ud_pipeline else 'all'} && python -m spacy project run bench"
    )
    return lines + ["", source_note(results, sources, command)]


def model_card_notes(root: Path = Path("."), ud_pipeline: bool = True) -> str:
    """The model card's end for en_pairatt (the UD pipeline) or, not `ud_pipeline`, en_pairatt_parser."""
    results = Results(root)
    measured, limits = "\n".join(measured_lines(results, ud_pipeline)), limits_block(results, ud_pipeline)
    return TEMPLATE.read_text(encoding="utf8").format(measured=measured, limits=limits).rstrip("\n") + "\n"
