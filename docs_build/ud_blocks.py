"""The UD pipeline's blocks (docs/ud_pipeline.md): its CoNLL 2018 scores beside published ones, its targets,
its speed over its own parser and its training cost, its errors, and what the UD tokenizer rules give; their
prose in templates/ud_blocks.md."""

from spacy_pairatt.evaluation.ud_eval import METRICS, f1_percent

from .blocks import Prose, table, training_cost, verdict
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
    """The UD pipeline's CoNLL 2018 scores beside published ones, and its targets."""
    rows = [
        (system, data, {metric: f1_percent(result, metric) for metric in result["metrics"]})
        for system, data, path in UD_PIPELINE_ROWS
        if (result := results.json(path)) is not None
    ]
    published = (results.json(PUBLISHED_UD_FILE) or {}).get("rows", [])
    rows += [(f"{row['system']}, {row['input']}", row["data"], row["scores"]) for row in published]
    cells = [(system, data, *(f"{s[m]:.2f}" if m in s else "–" for m in METRICS)) for system, data, s in rows]
    text = table(("system", "data", *METRICS), cells) + "\n\n" + ud_pipeline_targets(results)
    cited = {}  # source -> where it was read, each once, in row order
    for row in published:
        cited.setdefault(row["source"], []).append(row["read_in"])
    sources = "; ".join(f"{source} (read in {', '.join(dict.fromkeys(read))})" for source, read in cited.items())
    if sources:
        text += "\n" + PROSE("published", path=PUBLISHED_UD_FILE, sources=sources) + "\n"
    return text + "\n"


def ud_pipeline_targets(results: Results) -> str:
    """The targets, each from exact scores, or 'not measured yet' where a file is missing; speed and training."""
    pipeline, alone, docs, parser_only = (results.json(path) for path in UD_BAR_FILES)
    test_gold = results.json(ud_pipeline_file("test", "gold_tokens"))

    def f1(result, metric):
        return None if result is None else f1_percent(result, metric)

    def score(result, key):
        return None if result is None else 100 * result["scores"][key]

    las_change = None if pipeline is None or alone is None else score(pipeline, "dep_las") - score(alone, "dep_las")
    targets = (
        ("UPOS, EWT test, gold tokens", f1(test_gold, "UPOS"), UPOS_BAR, "{:.2f}"),
        ("Lemmas, EWT test, gold tokens", f1(test_gold, "Lemmas"), LEMMAS_BAR, "{:.2f}"),
        ("sentence F, EWT dev Docs of 10 sentences", score(docs, "sents_f"), SENTENCE_F_BAR, "{:.2f}"),
        ("parser LAS, EWT test, pipeline minus parser alone", las_change, LAS_CHANGE_BAR, "{:+.2f}"),
    )
    rows = [
        (name, fmt.format(bar), "–", "not measured yet")
        if value is None
        else (name, fmt.format(bar), fmt.format(value), verdict(value >= bar))
        for name, value, bar, fmt in targets
    ]
    speed = "not measured yet"
    if pipeline is not None and parser_only is not None:
        pipeline_speed, alone_speed = pipeline["words_per_second"], parser_only["words_per_second"]
        speed = PROSE("speed", ratio=pipeline_speed / alone_speed, pipeline=pipeline_speed, alone=alone_speed)
    training = "not measured yet"
    if all(results.json(path) is not None for _, path in UD_TRAINING_COSTS):
        runs = [training_cost(results, path, what=what) for what, path in UD_TRAINING_COSTS]
        training = "; ".join(PROSE("training", run=run) for run in runs)
    text = table(("target", "at least", "measured", "verdict"), rows) + "\n\n"
    return text + PROSE("speed-and-training", speed=speed, training=training) + "\n"


def cell(text: str) -> str:
    """A word in a markdown table cell: its pipes escaped."""
    return f"`{text.replace('|', chr(92) + '|')}`"


def ud_errors_block(results: Results, shown: int = 10) -> str:
    """Where the pipeline's lemmas and sentences go wrong on EWT dev from raw text (`ud-eval --errors`)."""
    path = UD_ERRORS_FILES[0][0]
    errors = (results.json(path) or {}).get("errors")
    if errors is None:
        return PROSE("errors-not-measured", path=path) + "\n\n"
    lemmas, bounds = errors["lemmas"], errors["sentence_boundaries"]
    kinds = ", ".join(
        f"{kind.replace('_', ' ')} {count:,} ({100 * count / max(lemmas['wrong'], 1):.0f}%)"
        for kind, count in lemmas["kinds"].items()
    )
    commonest = [
        (cell(c["form"]), cell(c["gold"]), cell(c["system"]), c["upos"], c["count"])
        for c in lemmas["commonest"][:shown]
    ]
    boundaries = [
        (kind, f"{found['count']:,}", f"{found['next_word_capitalised']:,}",
         ", ".join(f"{cell(c['before'])} {cell(c['after'])} ({c['count']})" for c in found["commonest"][:5]))
        for kind, found in ((kind, bounds[kind]) for kind in ("missed", "false"))
    ]  # fmt: skip
    return (
        PROSE("lemma-errors", lemmas=lemmas, kinds=kinds) + "\n\n"
        + table(("form", "gold lemma", "system lemma", "gold UPOS", "count"), commonest) + "\n\n"
        + PROSE("boundary-errors", bounds=bounds) + "\n\n"
        + table(("boundary", "count", "next word capitalised", "commonest (word before, word after)"), boundaries)
        + "\n\n"
    )  # fmt: skip


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
