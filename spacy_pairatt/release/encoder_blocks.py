"""The encoder comparison (docs/encoders.md): results/encoders.json, which `encoders-table` writes
from the runs' own files (study/encoders_table.py), as a markdown table."""

from typing import Dict, List, Optional

from .blocks import speed_days_note
from .results import Results, source_note

ENCODERS_FILE = "results/encoders.json"
COLUMNS = (
    "encoder", "config", "attention", "dev UAS", "dev LAS", "test UAS", "test LAS", "words/s", "b/a",
    "training (min)", "peak RSS (MB)",
)  # fmt: skip


def number(value: Optional[float], pattern: str) -> str:
    return "–" if value is None else format(value, pattern)


def row_cells(row: Dict) -> List[str]:
    """One table row; a run whose files are not there shows "not run" instead of its figures."""
    config = f"`{row['config'].rsplit('/', 1)[-1]}`"
    head = [row["encoder"], config, "yes" if row["attention"] else "no"]
    if row["status"] == "not run":
        return head + ["not run"] + [""] * (len(COLUMNS) - len(head) - 1)
    scores = [number((row[split] or {}).get(metric), ".1f") for split in ("dev", "test") for metric in ("uas", "las")]
    wall = None if row["training_wall_s"] is None else row["training_wall_s"] / 60
    speed = [number(row["words_per_s"], ",.0f"), number(row["b_over_a"], ".2f")]
    return head + scores + speed + [number(wall, ".0f"), number(row["peak_rss_mb"], ",.0f")]


def comparison_line(row: Dict) -> str:
    """The paper's question on the row's encoder: ft:emb+att - ft:emb, or what it waits for."""
    comparison = row["ft_emb_vs_emb_att"]
    what = f"{row['encoder']}, ft:emb+att - ft:emb, EWT test LAS"
    if comparison["status"] != "run":
        return f"{what}: not run yet (needs {', '.join(f'`{path}`' for path in comparison['needs'])})."
    low, high = comparison["interval"]
    seeds = ", ".join(str(seed) for seed in comparison["seeds"])
    holds = "above 0" if low > 0 else "below 0" if high < 0 else "spans 0"
    return (
        f"{what}: {comparison['difference']:+.2f}, 95% interval [{low:+.2f}, {high:+.2f}] ({holds}); training "
        f"seeds {seeds}, paired bootstrap over test sentences."
    )


def encoders_markdown(table: Dict) -> str:
    """The rows as a markdown table, then each attention comparison."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row_cells(row)) + " |" for row in table["rows"]]
    comparisons = [comparison_line(row) for row in table["rows"] if "ft_emb_vs_emb_att" in row]
    return "\n".join(lines + ([""] + comparisons if comparisons else []))


def encoders_block(results: Results) -> str:
    """docs/encoders.md's table, with the files behind every row that has run."""
    table = results.json(ENCODERS_FILE)
    if table is None:
        return source_note(results, [(ENCODERS_FILE, "parser")], "python -m spacy project run encoders-table")
    found = [
        (path, "bench" if what == "speed" else "parser")
        for row in table["rows"]
        for what, path in row["files"].items()
        if path not in row["missing"]
    ]
    speed = [(path, kind) for path, kind in found if kind == "bench"]
    return (
        encoders_markdown(table)
        + "\n\n"
        + speed_days_note(results, speed)
        + source_note(results, [(ENCODERS_FILE, "parser"), *found], "python -m spacy project run encoders-table")
    )
