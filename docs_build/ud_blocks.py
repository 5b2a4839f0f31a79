"""The UD pipeline's blocks (docs/ud_pipeline.md): its CoNLL 2018 scores beside published ones, its targets,
its speed over its own parser and its training cost, its errors, and what the UD tokenizer rules give; their
prose in templates/ud_blocks.md."""

from typing import Dict, List

from spacy_pairatt.evaluation.ud_eval import METRICS, f1_percent

from .blocks import Prose, paragraphs, table, training_cost, verdict
from .results import Results

PROSE = Prose("ud_blocks.md")
UD_KIND = "ud_pipeline"  # the result kind (results.RESULT_KINDS) of the UD pipeline's files


def ud_pipeline_file(split: str, reading: str) -> str:
    """`ud-eval --output` of the UD pipeline (evaluate-pipeline) on EWT `split` from `reading`
    ("raw_text", "gold_tokens", or "raw_text_spacy_tokenizer": raw text through spaCy's own tokenizer)."""
    return f"results/ud_pipeline_{split}_{reading}.json"


UD_PIPELINE_ROWS = tuple(
    (f"this pipeline, {reading.replace('_', ' ')}", f"EWT 2.16 {split}", ud_pipeline_file(split, reading))
    for split in ("dev", "test")
    for reading in ("raw_text", "gold_tokens")
)
UD_PIPELINE_DEV_DOCS = "results/ud_pipeline_dev_docs.json"  # dev Docs of 10 sentences, its own sentences
PUBLISHED_UD_FILE = "results/published/ud_english_ewt.json"
# The targets: UPOS and Lemmas F1 (EWT test, gold tokens), sentence F (EWT dev Docs of 10 sentences), and the
# parser's LAS in the pipeline minus alone (EWT test, gold tokens and sentences).
UPOS_BAR, LEMMAS_BAR, SENTENCE_F_BAR, LAS_CHANGE_BAR = 96.0, 96.5, 85.0, -0.3
UD_BAR_FILES = (
    "results/ud_pipeline_test.json",  # the pipeline, EWT test, gold tokens and sentences (spaCy's scorer)
    "results/pairatt_test.json",  # the parser alone at the same budget (`spacy project run compare`)
    UD_PIPELINE_DEV_DOCS,
    "results/ud_pipeline_test_parser_only.json",  # the same weights without senter, tagger, morphologizer, lemmatizer
)
# Each training's run_cost file: stage 1 (every component), stage 2 (the senter on the frozen stage 1) and the
# parser alone at the same budget as stage 1.
UD_TRAINING_COSTS = (
    ("stage 1 (all components)", "results/train_ud_pipeline_cost.json"),
    ("stage 2 (the senter)", "results/train_ud_pipeline_senter_cost.json"),
    ("the parser alone", "results/train_pairatt_cost.json"),
)
UD_PIPELINE_FILES = tuple(
    (path, UD_KIND if "ud_pipeline" in path else "parser")
    for path in [row[-1] for row in UD_PIPELINE_ROWS] + list(UD_BAR_FILES) + [path for _, path in UD_TRAINING_COSTS]
)
UD_ERRORS_FILES = [(ud_pipeline_file("dev", "raw_text"), UD_KIND)]


def against_bar(value: float, bar: float) -> str:
    """How a figure stands to one of the UD pipeline's targets, in words."""
    return f"{'at or above' if value >= bar else 'below'} the target of {bar:g}"


def ud_pipeline_block(results: Results) -> str:
    """The UD pipeline's CoNLL 2018 scores beside published ones, its targets, speed and training cost."""
    rows = [
        (system, data, {metric: f1_percent(result, metric) for metric in result["metrics"]})
        for system, data, path in UD_PIPELINE_ROWS
        if (result := results.json(path)) is not None
    ]
    published = (results.json(PUBLISHED_UD_FILE) or {}).get("rows", [])
    rows += [(f"{row['system']}, {row['input']}", row["data"], row["scores"]) for row in published]
    cells = [(system, data, *(f"{s[m]:.2f}" if m in s else "–" for m in METRICS)) for system, data, s in rows]
    cited = {}  # source -> where it was read, each once, in row order
    for row in published:
        cited.setdefault(row["source"], []).append(row["read_in"])
    sources = "; ".join(f"{source} (read in {', '.join(dict.fromkeys(read))})" for source, read in cited.items())
    return paragraphs(
        table(("system", "data", *METRICS), cells),
        PROSE.table("targets", ud_pipeline_targets(results)),
        PROSE("speed-and-training", speed=ud_pipeline_speed(results), training=ud_pipeline_training(results)),
        sources and PROSE("published", path=PUBLISHED_UD_FILE, sources=sources),
    )


def ud_pipeline_targets(results: Results) -> List[Dict]:
    """Each target's row, from exact scores, or 'not measured yet' where a file is missing."""
    pipeline, alone, docs, _ = (results.json(path) for path in UD_BAR_FILES)
    test_gold = results.json(ud_pipeline_file("test", "gold_tokens"))
    # Each figure is None where a file behind it is missing.
    f1 = {metric: test_gold and f1_percent(test_gold, metric) for metric in ("UPOS", "Lemmas")}
    sentence_f = docs and 100 * docs["scores"]["sents_f"]
    las_change = pipeline and alone and 100 * pipeline["scores"]["dep_las"] - 100 * alone["scores"]["dep_las"]
    targets = (
        ("UPOS, EWT test, gold tokens", f1["UPOS"], UPOS_BAR, "{:.2f}"),
        ("Lemmas, EWT test, gold tokens", f1["Lemmas"], LEMMAS_BAR, "{:.2f}"),
        ("sentence F, EWT dev Docs of 10 sentences", sentence_f, SENTENCE_F_BAR, "{:.2f}"),
        ("parser LAS, EWT test, pipeline minus parser alone", las_change, LAS_CHANGE_BAR, "{:+.2f}"),
    )
    return [
        {"name": name, "bar": fmt.format(bar), "value": "–", "verdict": "not measured yet"}
        if value is None
        else {"name": name, "bar": fmt.format(bar), "value": fmt.format(value), "verdict": verdict(value >= bar)}
        for name, value, bar, fmt in targets
    ]


def ud_pipeline_speed(results: Results) -> str:
    """The pipeline's words/s over those of its transformer and parser alone."""
    pipeline, parser_only = results.json(UD_BAR_FILES[0]), results.json(UD_BAR_FILES[3])
    if pipeline is None or parser_only is None:
        return "not measured yet"
    speeds = pipeline["words_per_second"], parser_only["words_per_second"]
    return PROSE("speed", ratio=speeds[0] / speeds[1], pipeline=speeds[0], alone=speeds[1])


def ud_pipeline_training(results: Results) -> str:
    """Steps, wall time and peak RSS of each stage of the pipeline's training beside the parser alone's."""
    if any(results.json(path) is None for _, path in UD_TRAINING_COSTS):
        return "not measured yet"
    return "; ".join(PROSE("training", run=training_cost(results, path, what=what)) for what, path in UD_TRAINING_COSTS)


def cell(text: str) -> str:
    """A word in a markdown table cell: its pipes escaped."""
    return f"`{text.replace('|', chr(92) + '|')}`"


def ud_errors_block(results: Results, shown: int = 10) -> str:
    """Where the pipeline's lemmas and sentences go wrong on EWT dev from raw text (`ud-eval --errors`)."""
    path = UD_ERRORS_FILES[0][0]
    errors = (results.json(path) or {}).get("errors")
    if errors is None:
        return paragraphs(PROSE("errors-not-measured", path=path))
    lemmas, bounds = errors["lemmas"], errors["sentence_boundaries"]
    kinds = ", ".join(
        f"{kind.replace('_', ' ')} {count:,} ({100 * count / max(lemmas['wrong'], 1):.0f}%)"
        for kind, count in lemmas["kinds"].items()
    )
    commonest = [
        {**c, **{key: cell(c[key]) for key in ("form", "gold", "system")}} for c in lemmas["commonest"][:shown]
    ]
    boundaries = [
        {**bounds[kind], "kind": kind, "commonest": ", ".join(
            f"{cell(c['before'])} {cell(c['after'])} ({c['count']})" for c in bounds[kind]["commonest"][:5])}
        for kind in ("missed", "false")
    ]  # fmt: skip
    return paragraphs(
        PROSE("lemma-errors", lemmas=lemmas, kinds=kinds),
        PROSE.table("lemma-errors-table", commonest),
        PROSE("boundary-errors", bounds=bounds),
        PROSE.table("boundary-errors-table", boundaries),
    )


TOKENIZER_EFFECT_ROWS = (
    ("UD English (the pipeline's own)", ud_pipeline_file("dev", "raw_text"), UD_KIND),
    (
        "spaCy English (`parse --tokenizer spacy.Tokenizer.v1`)",
        ud_pipeline_file("dev", "raw_text_spacy_tokenizer"),
        UD_KIND,
    ),
)
TOKENIZER_EFFECT_METRICS = ("Tokens", "Words", "Sentences", "UPOS", "Lemmas", "UAS", "LAS", "MLAS")


def tokenizer_effect_block(results: Results) -> str:
    """The trained pipeline on EWT dev raw text with its own tokenizer and with spaCy's: what the rules give."""
    found = [(name, results.json(path)) for name, path, _ in TOKENIZER_EFFECT_ROWS]
    rows = [
        (name, *("–" if result is None else f"{f1_percent(result, m):.2f}" for m in TOKENIZER_EFFECT_METRICS))
        for name, result in found
    ]
    (_, ours), (_, stock) = found
    if ours is not None and stock is not None:
        differences = (f"{f1_percent(ours, m) - f1_percent(stock, m):+.2f}" for m in TOKENIZER_EFFECT_METRICS)
        rows.append(("UD English minus spaCy English", *differences))
    return table(("tokenizer", *TOKENIZER_EFFECT_METRICS), rows) + "\n\n"
