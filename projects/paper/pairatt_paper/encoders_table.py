"""results/encoders.json: one row per (encoder, config) of the parser, from the runs' own result files.

Each row gathers what the project's commands already write for a run: `evaluate` on EWT dev and
test (spaCy's scorer, punctuation excluded), `bench/run_cost.py` for the training's wall time and
peak RSS, `bench/speed.py` for words/s and the parser's speed over the transformer's (b/a). A row
whose files are not there yet is listed as not run, with the files it waits for: nothing is
filled in from elsewhere. On MPNet the paper's question, fine-tuned hidden states with attention
against without (ft:emb+att - ft:emb), is the paired bootstrap over test sentences
(`bootstrap.paired_bootstrap_seeds`) on every training seed both runs have per-document arc counts for.
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from spacy_pairatt.reporting.json_files import read_json, write_json
from spacy_pairatt.reporting.provenance import provenance

from .bootstrap import paired_bootstrap_seeds


@dataclass(frozen=True)
class EncoderRun:
    """Where one (encoder, config) run's result files are, relative to the results folder."""

    encoder: str
    config: str
    attention: bool
    dev: str
    test: str
    training_cost: str
    speed: Optional[str]  # None where bench/speed.py does not time it (a parser without attention)
    # per training seed, the `evaluate --arcs` file on EWT test (what the paired bootstrap reads)
    test_arcs: Tuple[Tuple[int, str], ...] = ()

    @property
    def files(self) -> Dict[str, str]:
        files = {"dev": self.dev, "test": self.test, "training_cost": self.training_cost, "speed": self.speed}
        return {what: name for what, name in files.items() if name is not None}


MINILM = "all-MiniLM-L6-v2"
MPNET = "all-mpnet-base-v2"
ENCODER_RUNS = (
    EncoderRun(
        MINILM, "configs/parser_minilm.cfg", True,
        "pairatt_dev.json", "pairatt_test.json", "train_pairatt_cost.json", "bench_speed.json",
    ),
    EncoderRun(
        MPNET, "configs/parser_mpnet.cfg", True,
        "mpnet_dev.json", "mpnet_test.json", "train_mpnet_cost.json", "bench_speed_mpnet.json",
        ((0, "mpnet_test_arcs.json"), (1, "mpnet_seed1_test_arcs.json")),
    ),
    EncoderRun(
        MPNET, "configs/parser_mpnet_emb.cfg", False,
        "mpnet_emb_dev.json", "mpnet_emb_test.json", "train_mpnet_emb_cost.json", None,
        ((0, "mpnet_emb_test_arcs.json"), (1, "mpnet_emb_seed1_test_arcs.json")),
    ),
)  # fmt: skip
# (with attention, without): the rows whose difference answers the paper's question on an encoder
ATTENTION_PAIRS = ((ENCODER_RUNS[1], ENCODER_RUNS[2]),)


def uas_las_percent(result: Optional[Dict]) -> Optional[Dict[str, float]]:
    """UAS and LAS in percent from an `evaluate` file (spaCy's scorer, punctuation excluded)."""
    if result is None:
        return None
    return {metric: 100 * result["scores"][f"dep_{metric}"] for metric in ("uas", "las")}


def configured_steps(config: str) -> Optional[int]:
    """The config's [training] max_steps, read as text (no spaCy needed); None where it cannot be read."""
    path = Path(__file__).resolve().parents[3] / config
    match = re.search(r"^max_steps\s*=\s*(\d+)", path.read_text(encoding="utf8"), re.M) if path.exists() else None
    return int(match.group(1)) if match else None


def steps_and_why(cost: Dict, config: str) -> Tuple[Optional[int], Optional[str]]:
    """The steps a run trained and, where fewer than its config's, why: stopped at a step (its cost file
    says where and why) or a `--training.max_steps` override in the command its cost file records."""
    if cost.get("stopped_at_step"):
        return cost["stopped_at_step"], cost.get("why_stopped")
    override = re.search(r"--training\.max_steps[= ](\d+)", cost.get("command", ""))
    if override:
        return int(override.group(1)), f"`--training.max_steps {override.group(1)}` in its command"
    return configured_steps(config), None


def located(results_dir, name: str) -> Path:
    """`name` in the first results folder that has it: `results_dir` is one folder or several (the study's own
    results/ and the user workflow's, where train-mpnet and evaluate-mpnet write)."""
    folders = [Path(results_dir)] if isinstance(results_dir, (str, Path)) else [Path(path) for path in results_dir]
    return next((folder / name for folder in folders if (folder / name).exists()), folders[0] / name)


def encoder_row(results_dir, run: EncoderRun) -> Dict:
    """A run's row: its scores, speed and training cost where their files exist, `missing` the others."""
    found = {what: read_json(located(results_dir, name)) for what, name in run.files.items()}
    speed = (found.get("speed") or {}).get("inference", {})
    cost = found["training_cost"] or {}
    missing = [name for what, name in run.files.items() if found[what] is None]
    steps, fewer_because = steps_and_why(cost, run.config)
    return {
        "encoder": run.encoder,
        "config": run.config,
        "attention": run.attention,
        "status": "run" if not missing else "not run" if len(missing) == len(run.files) else "partly run",
        "dev": uas_las_percent(found["dev"]),
        "test": uas_las_percent(found["test"]),
        "words_per_s": speed.get("median_words_per_second", {}).get("b_pairatt"),
        "b_over_a": speed.get("ratio_b_over_a"),
        # a run stopped early or told to train fewer steps was scored at its last checkpoint
        "steps": steps,
        "planned_steps": configured_steps(run.config),
        "stopped_early": fewer_because,
        "training_wall_s": cost.get("wall_seconds"),
        "peak_rss_mb": cost.get("peak_rss_mb"),
        "files": {what: f"results/{name}" for what, name in run.files.items()},
        "missing": [f"results/{name}" for name in missing],
    }


def attention_comparison(results_dir, with_attention: EncoderRun, without: EncoderRun, resamples: int) -> Dict:
    """ft:emb+att - ft:emb on EWT test LAS (and UAS), pooled over the seeds both runs have arcs for."""
    with_files, without_files = dict(with_attention.test_arcs), dict(without.test_arcs)
    pairs = {
        seed: (read_json(located(results_dir, with_files[seed])), read_json(located(results_dir, without_files[seed])))
        for seed in sorted(with_files.keys() & without_files.keys())
    }
    seeds = [seed for seed, (better, worse) in pairs.items() if better is not None and worse is not None]
    if not seeds:
        needed = [f"results/{files[seed]}" for seed in sorted(pairs)[:1] for files in (with_files, without_files)]
        return {"status": "not run", "needs": needed}
    better, worse = [pairs[seed][0] for seed in seeds], [pairs[seed][1] for seed in seeds]
    las, uas = (paired_bootstrap_seeds(better, worse, metric, resamples) for metric in ("las", "uas"))
    return {
        "status": "run",
        "metric": "las",
        "difference": las["difference"],
        "interval": [las["low"], las["high"]],
        "p_not_better": las["p_not_better"],
        "by_seed": las["by_seed"],
        "seeds": seeds,
        "uas": {"difference": uas["difference"], "interval": [uas["low"], uas["high"]]},
        "resamples": resamples,
    }


def encoders_table(results_dir, resamples: int = 10_000) -> Dict:
    """Every row of ENCODER_RUNS; the attention comparison in the row that has attention."""
    rows = [encoder_row(results_dir, run) for run in ENCODER_RUNS]
    for with_attention, without in ATTENTION_PAIRS:
        row = rows[ENCODER_RUNS.index(with_attention)]
        row["ft_emb_vs_emb_att"] = attention_comparison(results_dir, with_attention, without, resamples)
    return {"rows": rows}


def write_encoders_table(results_dir, output_json: Path, output_md: Optional[Path]) -> Dict:
    """Write results/encoders.json (and the table as markdown) from the runs' result files."""
    table = {**encoders_table(results_dir), "provenance": provenance()}
    write_json(output_json, table)
    if output_md is not None:
        Path(output_md).write_text(encoders_markdown(table) + "\n", encoding="utf8")
    print(encoders_markdown(table))
    return table


# The table as markdown (results/encoders.md, and docs/encoders.md's generated block).
COLUMNS = (
    "encoder", "config", "attention", "steps", "dev UAS", "dev LAS", "test UAS", "test LAS", "words/s", "b/a",
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
    steps = number(row.get("steps"), "d") + ("*" if row.get("stopped_early") else "")
    scores = [number((row[split] or {}).get(metric), ".1f") for split in ("dev", "test") for metric in ("uas", "las")]
    wall = None if row["training_wall_s"] is None else row["training_wall_s"] / 60
    speed = [number(row["words_per_s"], ",.0f"), number(row["b_over_a"], ".2f")]
    return head + [steps] + scores + speed + [number(wall, ".0f"), number(row["peak_rss_mb"], ",.0f")]


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
    stopped = [
        f"\\* {row['encoder']}, `{row['config'].rsplit('/', 1)[-1]}`: trained {row['steps']} of its "
        f"{row['planned_steps']} steps and scored at that checkpoint ({row['stopped_early']})."
        for row in table["rows"]
        if row.get("stopped_early")
    ]
    comparisons = [comparison_line(row) for row in table["rows"] if "ft_emb_vs_emb_att" in row]
    notes = stopped + comparisons
    return "\n".join(lines + ([""] + notes if notes else []))
