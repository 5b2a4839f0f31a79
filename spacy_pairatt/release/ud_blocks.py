"""The UD pipeline's generated block (docs/ud_pipeline.md, issue 18): its CoNLL 2018 scores beside
published ones, the issue's bars, its speed over its own parser and its training cost; the result paths
the model card reads too."""

import json
import shlex
from pathlib import Path

from .results import Results, source_note


def ud_pipeline_file(split: str, reading: str) -> str:
    """`ud-eval --output` of the UD pipeline (evaluate-pipeline) on EWT `split` from `reading`
    ("raw_text", "gold_tokens", or "raw_text_spacy_tokenizer": raw text through spaCy's own tokenizer)."""
    return f"results/ud_pipeline_{split}_{reading}.json"


UD_PIPELINE_ROWS = tuple(
    (f"this pipeline, {reading.replace('_', ' ')}", f"EWT 2.16 {split}", ud_pipeline_file(split, reading))
    for split in ("dev", "test")
    for reading in ("raw_text", "gold_tokens")
)
UD_PIPELINE_TEST_SCORES = "results/ud_pipeline_test.json"  # spaCy's scorer, gold tokens and sentences
UD_PIPELINE_DEV_DOCS = "results/ud_pipeline_dev_docs.json"  # dev Docs of 10 sentences, its own sentences
PUBLISHED_UD_FILE = "results/published/ud_english_ewt.json"
UD_KIND = "ud_pipeline"  # the kind of result (release/results.py) of the UD pipeline's files
# Issue 18's bars: UPOS and Lemmas F1 (EWT test, gold tokens), sentence F (EWT dev Docs of 10
# sentences), and the parser's LAS in the pipeline minus alone (EWT test, gold tokens and sentences).
UPOS_BAR, LEMMAS_BAR, SENTENCE_F_BAR, LAS_CHANGE_BAR = 96.0, 96.5, 85.0, -0.3


def against_bar(value: float, bar: float) -> str:
    """How a figure stands to one of issue 18's bars, in words."""
    return f"{'at or above' if value >= bar else 'below'} issue 18's bar of {bar:g}"


def result_kind(path: str) -> str:
    """UD_KIND for the UD pipeline's own files, "parser" for the parser alone's beside them."""
    return UD_KIND if "ud_pipeline" in path else "parser"


def ud_pipeline_block(results: Results) -> str:
    """The UD pipeline's CoNLL 2018 scores beside published ones, and issue 18's bars (docs/ud_pipeline.md)."""
    from ..evaluation.ud_eval import METRICS, f1_percent

    rows = [
        (system, data, {metric: f1_percent(result, metric) for metric in result["metrics"]})
        for system, data, path in UD_PIPELINE_ROWS
        if (result := results.json(path)) is not None
    ]
    published = (results.json(PUBLISHED_UD_FILE) or {}).get("rows", [])
    rows += [(f"{row['system']}, {row['input']}", row["data"], row["scores"]) for row in published]
    lines = ["| system | data | " + " | ".join(METRICS) + " |", "|---|---|" + "---|" * len(METRICS)]
    for system, data, scores in rows:
        cells = [f"{scores[m]:.2f}" if m in scores else "–" for m in METRICS]
        lines.append(f"| {system} | {data} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n\n" + ud_pipeline_bars(results)
    cited = {}  # source -> where it was read, each once, in row order
    for row in published:
        cited.setdefault(row["source"], []).append(row["read_in"])
    sources = "; ".join(f"{source} (read in {', '.join(dict.fromkeys(read))})" for source, read in cited.items())
    if sources:
        text += f"\nPublished rows (`{PUBLISHED_UD_FILE}`), copied, not measured here: {sources}.\n\n"
    paths = [row[-1] for row in UD_PIPELINE_ROWS] + [path for path, _ in UD_BAR_FILES]
    paths += [path for _, path in UD_TRAINING_COSTS]
    ours = [(path, result_kind(path)) for path in paths]
    return text + source_note(results, ours, "python -m spacy project run ud-pipeline")


UD_BAR_FILES = (
    (UD_PIPELINE_TEST_SCORES, "the pipeline, EWT test, gold tokens and sentences (spaCy's scorer)"),
    ("results/pairatt_test.json", "the parser alone at the same budget (`spacy project run compare`)"),
    (UD_PIPELINE_DEV_DOCS, "the pipeline on EWT dev Docs of 10 sentences, its own sentences"),
    ("results/ud_pipeline_test_parser_only.json", "the same weights without senter, tagger, morphologizer, lemmatizer"),
)


def ud_pipeline_bars(results: Results) -> str:
    """Issue 18's bars, each from exact scores, or 'not measured yet' where a file is missing."""
    from ..evaluation.ud_eval import f1_percent

    pipeline, alone, docs, parser_only = (results.json(path) for path, _ in UD_BAR_FILES)
    test_gold = results.json(ud_pipeline_file("test", "gold_tokens"))

    def f1(result, metric):
        return None if result is None else f1_percent(result, metric)

    def score(result, key):
        return None if result is None else 100 * result["scores"][key]

    las_change = None if pipeline is None or alone is None else score(pipeline, "dep_las") - score(alone, "dep_las")
    speed = (
        None
        if pipeline is None or parser_only is None
        else pipeline["words_per_second"] / parser_only["words_per_second"]
    )
    bars = (
        ("UPOS, EWT test, gold tokens", f1(test_gold, "UPOS"), UPOS_BAR, "{:.2f}"),
        ("Lemmas, EWT test, gold tokens", f1(test_gold, "Lemmas"), LEMMAS_BAR, "{:.2f}"),
        ("sentence F, EWT dev Docs of 10 sentences", score(docs, "sents_f"), SENTENCE_F_BAR, "{:.2f}"),
        ("parser LAS, EWT test, pipeline minus parser alone", las_change, LAS_CHANGE_BAR, "{:+.2f}"),
    )
    lines = ["| bar | at least | measured | |", "|---|---|---|---|"]
    for name, value, bar, fmt in bars:
        shown, verdict = (
            ("–", "not measured yet")
            if value is None
            else (fmt.format(value), "met" if value >= bar else "**not met**")
        )
        lines.append(f"| {name} | {fmt.format(bar)} | {shown} | {verdict} |")
    cost = (
        "not measured yet"
        if speed is None
        else (
            f"{speed:.2f} times the words/s of its transformer and parser alone (`evaluate --without`, the same "
            f"weights, one run each: {pipeline['words_per_second']:,.0f} against "
            f"{parser_only['words_per_second']:,.0f} on EWT test)"
        )
    )
    return "\n".join(lines) + f"\n\nSpeed of the whole pipeline: {cost}.\nTraining: {training_cost(results)}.\n"


# Each training's run_cost file: stage 1 (every component), stage 2 (the senter on the frozen stage 1)
# and the parser alone at the same budget as stage 1.
UD_TRAINING_COSTS = (
    ("stage 1 (all components)", "results/train_ud_pipeline_cost.json"),
    ("stage 2 (the senter)", "results/train_ud_pipeline_senter_cost.json"),
    ("the parser alone", "results/train_pairatt_cost.json"),
)


def trained_steps(command: str, root: Path) -> int:
    """`training.max_steps` of a `spacy train CONFIG [--section.key value ...]` command run in the
    checkout `root`: its config as it is there, with the command's overrides."""
    from spacy.util import load_config

    args = shlex.split(command)
    config = args[args.index("train") + 1]
    overrides = {
        name[2:]: _config_value(value) for name, value in zip(args, args[1:]) if name.startswith("--") and "." in name
    }
    return int(load_config(root / config, overrides=overrides, interpolate=True)["training"]["max_steps"])


def _config_value(text: str):
    """An override's value as spaCy's CLI reads it: JSON where it parses, else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def training_cost(results: Results) -> str:
    """Steps, wall time and peak RSS of each stage of the pipeline's training beside the parser alone's."""
    runs = [(what, results.json(path)) for what, path in UD_TRAINING_COSTS]
    if any(cost is None for _, cost in runs):
        return "not measured yet"
    return "; ".join(
        f"{what} {trained_steps(cost['command'], results.root)} steps in {cost['wall_seconds'] / 60:.0f} min, "
        f"peak RSS {cost['peak_rss_mb']:,.0f} MB (`{cost['command']}`)"
        for what, cost in runs
    )


def ud_errors_block(results: Results, shown: int = 10) -> str:
    """Where the pipeline's lemmas and sentences go wrong on EWT dev from raw text (`ud-eval --errors`)."""
    path = ud_pipeline_file("dev", "raw_text")
    errors = (results.json(path) or {}).get("errors")
    if errors is None:
        return f"Not measured yet: `{path}` has no `errors` (`ud-eval --errors`).\n"
    lemmas, bounds = errors["lemmas"], errors["sentence_boundaries"]
    kinds = ", ".join(
        f"{kind.replace('_', ' ')} {count:,} ({100 * count / max(lemmas['wrong'], 1):.0f}%)"
        for kind, count in lemmas["kinds"].items()
    )
    lines = [
        f"**Lemmas**: {lemmas['wrong']:,} wrong of {lemmas['scored']:,} aligned words with a gold lemma; "
        f"by kind: {kinds}. Commonest:",
        "",
        "| form | gold lemma | system lemma | gold UPOS | count |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| `{cell(c['form'])}` | `{cell(c['gold'])}` | `{cell(c['system'])}` | {c['upos']} | {c['count']} |"
        for c in lemmas["commonest"][:shown]
    ]
    lines += [
        "",
        f"**Sentence boundaries** (the end of the text aside): gold {bounds['gold']:,}, system {bounds['system']:,}.",
        "",
        "| boundary | count | next word capitalised | commonest (word before, word after) |",
        "|---|---|---|---|",
    ]
    for kind in ("missed", "false"):
        found = bounds[kind]
        pairs = ", ".join(f"`{cell(c['before'])}` `{cell(c['after'])}` ({c['count']})" for c in found["commonest"][:5])
        lines.append(f"| {kind} | {found['count']:,} | {found['next_word_capitalised']:,} | {pairs} |")
    return (
        "\n".join(lines)
        + "\n\n"
        + source_note(results, [(path, UD_KIND)], "python -m spacy project run evaluate-pipeline")
    )


def cell(text: str) -> str:
    """A word in a markdown table cell: its pipes escaped."""
    return text.replace("|", "\\|")


TOKENIZER_EFFECT_ROWS = (
    ("UD English (the pipeline's own)", ud_pipeline_file("dev", "raw_text")),
    ("spaCy English (`parse --tokenizer spacy.Tokenizer.v1`)", ud_pipeline_file("dev", "raw_text_spacy_tokenizer")),
)
TOKENIZER_EFFECT_METRICS = ("Tokens", "Words", "Sentences", "UPOS", "Lemmas", "UAS", "LAS", "MLAS")


def tokenizer_effect_block(results: Results) -> str:
    """The trained pipeline on EWT dev raw text with its own tokenizer and with spaCy's: what the rules give."""
    from ..evaluation.ud_eval import f1_percent

    found = [(name, results.json(path)) for name, path in TOKENIZER_EFFECT_ROWS]
    lines = [
        "| tokenizer | " + " | ".join(TOKENIZER_EFFECT_METRICS) + " |",
        "|---|" + "---|" * len(TOKENIZER_EFFECT_METRICS),
    ]
    for name, result in found:
        cells = ["–" if result is None else f"{f1_percent(result, m):.2f}" for m in TOKENIZER_EFFECT_METRICS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    (_, ours), (_, stock) = found
    if ours is not None and stock is not None:
        cells = [f"{f1_percent(ours, m) - f1_percent(stock, m):+.2f}" for m in TOKENIZER_EFFECT_METRICS]
        lines.append("| UD English minus spaCy English | " + " | ".join(cells) + " |")
    sources = [(path, UD_KIND) for _, path in TOKENIZER_EFFECT_ROWS]
    return "\n".join(lines) + "\n\n" + source_note(results, sources, "python -m spacy project run evaluate-pipeline")
