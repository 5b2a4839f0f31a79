"""The UD pipeline's blocks (docs/ud_pipeline.md): its CoNLL 2018 scores beside published ones, its targets,
its speed over its own parser and its training cost, its errors, and what the UD tokenizer rules give; their
prose in templates/ud_blocks.md."""

from typing import Dict, List

from spacy_pairatt.evaluation.ud_eval import METRICS, f1_percent

from .blocks import Prose, paragraphs, table, training_cost, verdict
from .results import Results

PROSE = Prose("ud_blocks.md")
# The targets: UPOS and Lemmas F1 (EWT test, gold tokens), sentence F (EWT dev Docs of 10 sentences), and the
# parser's LAS in the pipeline minus alone (EWT test, gold tokens and sentences).
UPOS_BAR, LEMMAS_BAR, SENTENCE_F_BAR, LAS_CHANGE_BAR = 96.0, 96.5, 85.0, -0.3
TOKENIZER_EFFECT_METRICS = ("Tokens", "Words", "Sentences", "UPOS", "Lemmas", "UAS", "LAS", "MLAS")


def against_bar(value: float, bar: float) -> str:
    """How a figure stands to one of the UD pipeline's targets, in words."""
    return f"{'at or above' if value >= bar else 'below'} the target of {bar:g}"


def ud_pipeline_block(results: Results, block) -> str:
    """The UD pipeline's CoNLL 2018 scores beside published ones, its targets, speed and training cost."""
    rows = [
        (system, data, {metric: f1_percent(result, metric) for metric in result["metrics"]})
        for system, data, path, _ in block.files["scores"]
        if (result := results.json(path)) is not None
    ]
    published = (results.json(block["published"]) or {}).get("rows", [])
    rows += [(f"{row['system']}, {row['input']}", row["data"], row["scores"]) for row in published]
    cells = [(system, data, *(f"{s[m]:.2f}" if m in s else "–" for m in METRICS)) for system, data, s in rows]
    cited = {}  # source -> where it was read, each once, in row order
    for row in published:
        cited.setdefault(row["source"], []).append(row["read_in"])
    sources = "; ".join(f"{source} (read in {', '.join(dict.fromkeys(read))})" for source, read in cited.items())
    return paragraphs(
        table(("system", "data", *METRICS), cells),
        PROSE.table("targets", ud_pipeline_targets(results, block)),
        PROSE(
            "speed-and-training", speed=ud_pipeline_speed(results, block), training=ud_pipeline_training(results, block)
        ),
        sources and PROSE("published", path=block["published"], sources=sources),
    )


def ud_pipeline_targets(results: Results, block) -> List[Dict]:
    """Each target's row, from exact scores, or 'not measured yet' where a file behind it is missing."""
    pipeline, alone, docs, _ = (results.json(path) for _, path, _ in block.files["targets"])
    test_gold = results.json(block.files["scores"][3][2])  # EWT test, gold tokens
    # Each figure is None where a file behind it is missing.
    f1 = {metric: test_gold and f1_percent(test_gold, metric) for metric in ("UPOS", "Lemmas")}
    las_change = pipeline and alone and 100 * pipeline["scores"]["dep_las"] - 100 * alone["scores"]["dep_las"]
    figures = (
        ("UPOS, EWT test, gold tokens", f1["UPOS"], UPOS_BAR, "{:.2f}"),
        ("Lemmas, EWT test, gold tokens", f1["Lemmas"], LEMMAS_BAR, "{:.2f}"),
        (
            "sentence F, EWT dev Docs of 10 sentences",
            docs and 100 * docs["scores"]["sents_f"],
            SENTENCE_F_BAR,
            "{:.2f}",
        ),
        ("parser LAS, EWT test, pipeline minus parser alone", las_change, LAS_CHANGE_BAR, "{:+.2f}"),
    )
    return [
        {"name": name, "bar": fmt.format(bar), "value": "–" if value is None else fmt.format(value),
         "verdict": "not measured yet" if value is None else verdict(value >= bar)}
        for name, value, bar, fmt in figures
    ]  # fmt: skip


def ud_pipeline_speed(results: Results, block) -> str:
    """The pipeline's words/s over those of its transformer and parser alone."""
    pipeline, parser_only = (results.json(block.files["targets"][i][1]) for i in (0, 3))
    if pipeline is None or parser_only is None:
        return "not measured yet"
    speeds = pipeline["words_per_second"], parser_only["words_per_second"]
    return PROSE("speed", ratio=speeds[0] / speeds[1], pipeline=speeds[0], alone=speeds[1])


def ud_pipeline_training(results: Results, block) -> str:
    """Steps, wall time and peak RSS of each stage of the pipeline's training beside the parser alone's."""
    trainings = block.files["trainings"]
    if any(results.json(path) is None for _, path, _ in trainings):
        return "not measured yet"
    return "; ".join(PROSE("training", run=training_cost(results, path, what=what)) for what, path, _ in trainings)


def cell(text: str) -> str:
    """A word in a markdown table cell: its pipes escaped."""
    return f"`{text.replace('|', chr(92) + '|')}`"


def ud_errors_block(results: Results, block, shown: int = 10) -> str:
    """Where the pipeline's lemmas and sentences go wrong on EWT dev from raw text (`ud-eval --errors`)."""
    errors = (block.json(results, "errors") or {}).get("errors")
    if errors is None:
        return paragraphs(PROSE("errors-not-measured", path=block.path("errors")))
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


def tokenizer_effect_block(results: Results, block) -> str:
    """The trained pipeline on EWT dev raw text with its own tokenizer and with spaCy's: what the rules give."""
    found = [(name, results.json(path)) for name, path, _ in block.files["rows"]]
    rows = [
        (name, *("–" if result is None else f"{f1_percent(result, m):.2f}" for m in TOKENIZER_EFFECT_METRICS))
        for name, result in found
    ]
    (_, ours), (_, stock) = found
    if ours is not None and stock is not None:
        differences = (f"{f1_percent(ours, m) - f1_percent(stock, m):+.2f}" for m in TOKENIZER_EFFECT_METRICS)
        rows.append(("UD English minus spaCy English", *differences))
    return table(("tokenizer", *TOKENIZER_EFFECT_METRICS), rows) + "\n\n"
