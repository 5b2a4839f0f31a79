"""Results as text: JSON reports, percentages, the markdown tables of evaluation results and the marked
blocks of README.md and docs/*.md they go into.

A neutral module: it imports neither spaCy, torch nor numba, so that the commands and tools that only
write text (projects/paper's `python -m docs_build --check`) stay light.
"""

from statistics import median
from typing import Dict, List, Optional, Tuple

from .json_files import json_text, write_json

TOKEN_METRICS = ("Tokens", "Words", "Sentences")  # what tokenizer-eval scores (CoNLL 2018 names)


def report_json(result: Dict, path: Optional[str]) -> None:
    """Print a result and, where `path` is given, write it there."""
    print(write_json(path, result, sort_keys=True) if path else json_text(result, sort_keys=True))


def percent(value) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def cell(value, digits: int = 1) -> str:
    """A table cell: the value to `digits` decimals, or – where there is none."""
    return "–" if value is None else f"{value:.{digits}f}"


def results_table(rows: List[Dict]) -> str:
    """Markdown table from labelled evaluation results (each row: {"name", "split", "result"})."""
    lines = [
        "| model | split | UAS | LAS | UAS (punct) | LAS (punct) | one tree per sentence | sents F | words/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        scores = row["result"]["scores"]
        lines.append(
            f"| {row['name']} | {row['split']} | {percent(scores['dep_uas'])} | {percent(scores['dep_las'])} | "
            f"{percent(scores['dep_uas_punct'])} | {percent(scores['dep_las_punct'])} | "
            f"{percent(scores['dep_single_tree'])} | {percent(scores.get('sents_f'))} | "
            f"{row['result']['words_per_second']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def replace_marked_block(text: str, marker: str, block: str) -> str:
    """Replace what lies between `<!-- marker:start -->` and `<!-- marker:end -->` in `text`."""
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    if start not in text or end not in text:
        raise ValueError(f"no {start} ... {end} block to replace")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{block}{end}{tail}"


def relations_table(rows: List[Tuple[str, Dict]]) -> str:
    """Markdown tables (SemEval, then Re-DocRED) from labelled `evaluate_*` results."""
    semeval = [
        "SemEval-2010 Task 8 (`data`: the split scored; official macro-F1 over the nine directed relations):",
        "",
        "| model | features | data | official macro-F1 | macro-P | macro-R | 19-way macro-F1 | words/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    docred = [
        "Re-DocRED test (θ tuned on the tune split):",
        "",
        "| model | features | θ (tuned) | F1 | Ign F1 | AUC | Ign AUC | P | R | words/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, result in rows:
        scores, speed = result["scores"], f"{result['words_per_second']:.0f}"
        if result["task"] == "semeval":
            semeval.append(
                f"| {name} | {result['features']} | {result['data']} | {percent(scores['rel_semeval_macro_f1'])} | "
                f"{percent(scores['rel_semeval_macro_p'])} | {percent(scores['rel_semeval_macro_r'])} | "
                f"{percent(scores['rel_semeval_19way_macro_f1'])} | {speed} |"
            )
        else:
            docred.append(
                f"| {name} | {result['features']} | {result['theta']:.3f} | {percent(scores['rel_docred_f1'])} | "
                f"{percent(scores['rel_docred_ign_f1'])} | {percent(scores['rel_docred_auc'])} | "
                f"{percent(scores['rel_docred_ign_auc'])} | {percent(scores['rel_docred_precision'])} | "
                f"{percent(scores['rel_docred_recall'])} | {speed} |"
            )
    tables = [lines for lines in (semeval, docred) if len(lines) > 4]
    return "\n\n".join("\n".join(lines) for lines in tables) + "\n"


def points(value: float) -> str:
    return f"{100 * value:.2f}"


def tokenizer_tables(result: Dict) -> str:
    """Markdown: each tokenizer's F1 on each split, each rule's effect, and the disagreements by kind."""
    lines = ["| tokenizer | split | Tokens F1 | Words F1 | Sentences F1 |", "|---|---|---|---|---|"]
    for row in result["rows"]:
        for split, scores in row["scores"].items():
            figures = " | ".join(points(scores[metric]["f1"]) for metric in TOKEN_METRICS)
            lines.append(f"| {row['name']} | {split} | {figures} |")
    splits = list(next(iter(result["effects"].values())))
    header = " | ".join(f"{metric} {split}" for metric in ("Tokens", "Words") for split in splits)
    lines += ["", f"| rule | {header} |", "|---|" + "---|" * 2 * len(splits)]
    for rule, effect in result["effects"].items():
        figures = " | ".join(
            f"{100 * effect[split][metric]:+.2f}" for metric in ("Tokens", "Words") for split in splits
        )
        lines.append(f"| {rule} | {figures} |")
    ranked = result["disagreements"]
    columns = [(name, split) for name in ranked for split in ranked[name]]
    kinds = list(dict.fromkeys(kind for name, split in columns for kind in ranked[name][split]["kinds"]))
    lines += ["", "| disagreements | " + " | ".join(f"{name}, {split}" for name, split in columns) + " |"]
    lines.append("|---|" + "---|" * len(columns))
    for kind in ["all", *kinds]:
        counts = [
            ranked[name][split]["total"] if kind == "all" else ranked[name][split]["kinds"].get(kind, 0)
            for name, split in columns
        ]
        lines.append(f"| {kind} | " + " | ".join(map(str, counts)) + " |")
    return "\n".join(lines) + "\n"


# The targets for a long parse (docs/performance.md#memory): peak RSS growth from the shortest stream to one of up
# to 20,000 sentences (longer streams: the second bar), and the share of parse speed keeping memory flat may cost.
# A bench whose longest stream is shorter than HEAP_LONG_STREAM says nothing about a long parse.
HEAP_GROWTH_BARS = ((20_000, 0.10), (float("inf"), 0.15))
HEAP_LONG_STREAM = 20_000
HEAP_SPEED_BAR = 0.03


def timed_apart_seconds(run: Dict) -> Tuple[float, float]:
    """(transformer, parser) median seconds of one thread count of bench/speed.py's `thread_scaling`."""
    return median(run["transformer"]), median(run["parser"])


def timed_apart(speed: Dict) -> Optional[Tuple[float, float, float]]:
    """(transformer seconds, parser seconds, b/a) of a bench/speed.py result, taken apart by `thread_scaling` at the
    thread count the rest of the run used; None where that was not measured (GPU runs, files made before it)."""
    run = (speed.get("threads") or {}).get(str(speed["machine"].get("torch_threads")))
    return None if run is None else (*timed_apart_seconds(run), run["ratio_b_over_a"])


def heap_growth_targets() -> str:
    """HEAP_GROWTH_BARS in words: "+10% up to 20,000 sentences, +15% beyond"."""
    (size, first), (_, beyond) = HEAP_GROWTH_BARS
    return f"{100 * first:+.0f}% up to {size:,} sentences, {100 * beyond:+.0f}% beyond"


def heap_growth_within_bars(runs: List[Dict], speed_cost: float) -> bool:
    """Every run's peak RSS within its bar of the shortest run's, the longest run at least HEAP_LONG_STREAM
    sentences, at no more than HEAP_SPEED_BAR of parse speed (runs: bench/memory.py's)."""
    runs = sorted(runs, key=lambda run: run["sentences"])
    if len(runs) < 2 or runs[-1]["sentences"] < HEAP_LONG_STREAM or speed_cost > HEAP_SPEED_BAR:
        return False
    shortest = runs[0]["peak_rss_mb_while_parsing"]
    bars = [next(bar for size, bar in HEAP_GROWTH_BARS if run["sentences"] <= size) for run in runs]
    return all(run["peak_rss_mb_while_parsing"] <= (1 + bar) * shortest for run, bar in zip(runs, bars))


def jemalloc_release_setting(jemalloc: Dict) -> str:
    """How parsing bounds jemalloc's heap, from bench/memory.py's `jemalloc` record."""
    growth = jemalloc.get("heap_release_growth_bytes")
    when = f"once RSS has grown {growth / 2**20:.0f} MB since the last release" if growth else "at the same points"
    return f"turns jemalloc's own purging off and hands its unused pages back {when} (`integration/memory.py`)"


def heap_release_setting(release: Dict) -> str:
    """How parsing bounds glibc's heap, from bench/memory.py's `heap_release` record."""
    mapped = (
        f"maps arrays of {release['mmap_threshold_bytes'] / 2**20:.0f} MB and more (glibc's mmap threshold) and "
        if "mmap_threshold_bytes" in release
        else ""
    )
    growth_mb = release["min_growth_bytes"] / 2**20
    return (
        f"{mapped}hands glibc's free heap back (malloc_trim) once RSS has grown {growth_mb:.0f} MB since the last "
        f"release, looking every {release['words_between']:,} parsed words (`integration/memory.py`)"
    )
