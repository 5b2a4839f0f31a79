"""The attention curve's blocks (docs/attention_curve.md, docs/ablation.md, README.md): what attention adds to
the parser's EWT test LAS at each training size, read from results/attention_curve.json and the run records
behind it, and which runs of the `attention-curve` workflow (project.yml, its vars substituted as `spacy
project run` does) are not in the table yet."""

import shlex
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .blocks import table
from .results import Results, Sources

CURVE_JSON = "results/attention_curve.json"
RUNS_DIR = "results/attention_curve/runs"
WORKFLOW = "attention-curve"
# The comparisons the blocks show (better, worse): what attention adds, as a feature and fine-tuned through,
# and what fine-tuning through it adds to the feature alone.
SHOWN = (("att", "emb"), ("ftatt", "emb"), ("ftatt", "att"))
ATTENTION_GAINS = tuple(pair for pair in SHOWN if pair[1] == "emb")  # against emb, the row without attention
FROM = (
    f"All tables, by seed, with the PTB sample and each run's command, commit and time: `{CURVE_JSON}` and "
    "`results/attention_curve.md`, made from the run records in `results/attention_curve/runs/`.\n\n"
)
GOAL = 1.0  # the study's target: pooled gain in LAS points, with the interval above 0


def planned(root: Path) -> List[Tuple]:
    """(Run, its command line's Budget) of every run of the workflow's `curve-run` commands, in its order,
    parsed with the command's own arguments (no project.yml: none)."""
    import srsly
    from weasel.util import substitute_project_variables

    from spacy_pairatt.cli import build_parser
    from spacy_pairatt.cli.attention_curve import curve_budget
    from spacy_pairatt.study.attention_curve import plan_runs

    path = Path(root) / "project.yml"
    if not path.exists():
        return []
    project = substitute_project_variables(srsly.read_yaml(path))
    commands = {command["name"]: command for command in project.get("commands", [])}
    runs = []
    for name in project.get("workflows", {}).get(WORKFLOW, []):
        for words in map(shlex.split, commands.get(name, {}).get("script", [])):
            if words[:4] == ["python", "-m", "spacy_pairatt", "curve-run"]:
                args = build_parser().parse_args(words[3:])
                budget = curve_budget(args)
                runs += [(run, budget) for run in plan_runs(args.task, args.dataset, args.rows, args.sizes, args.seeds)]
    return runs


def missing_runs(results: Results) -> List[Dict]:
    """The planned runs the table lacks, grouped by task, data and size: their rows and seeds. A run trained to
    other steps than the plan's budget gives its size counts as missing."""
    from spacy_pairatt.study.attention_curve import TASKS, size_label

    present = {run["run_id"]: run for run in (results.json(CURVE_JSON) or {}).get("runs", [])}
    seeds_of_row: Dict[Tuple, Tuple] = {}  # (task, data, size, row) -> (a run, its missing seeds)
    for run, budget in planned(results.root):
        record = present.get(run.run_id)
        if record is not None and record["steps"] == budget.steps(record["n_train"]):
            continue
        _, seeds = seeds_of_row.setdefault((run.task, run.dataset, size_label(run.size), run.row), (run, []))
        seeds += [run.seed] if run.seed not in seeds else []
    # Rows of one size that miss the same seeds make one group: its rows x seeds are exactly the missing runs.
    groups: Dict[Tuple, Dict] = {}
    for (task, dataset, size, row), (run, seeds) in seeds_of_row.items():
        group = groups.setdefault(
            (task, dataset, size, tuple(seeds)),
            {"task": task, "dataset": dataset, "size": run.size, "rows": [], "seeds": seeds},
        )
        group["rows"].append(TASKS[task].row(row).name)
    return list(groups.values())


def missing_text(results: Results, compact: bool = False) -> str:
    missing = missing_runs(results)
    if not missing:
        return f"Every run of the `{WORKFLOW}` workflow's plan is in the table."
    parts = []
    for g in missing:
        seeds = "" if compact else f"; seed{'s' if len(g['seeds']) > 1 else ''} {', '.join(map(str, g['seeds']))}"
        size = "all" if g["size"] is None else f"{g['size']:,}"
        parts.append(f"{g['task']} on {g['dataset']}, {size} sentences ({', '.join(g['rows'])}{seeds})")
    return f"Not in the table yet (the `{WORKFLOW}` workflow's plan in project.yml): " + "; ".join(parts) + "."


def run_records(results: Results) -> Dict[str, Dict]:
    """The record behind each run of the table, by run id (runs without one are left out)."""
    runs = (results.json(CURVE_JSON) or {}).get("runs", [])
    found = {run["run_id"]: results.json(f"{RUNS_DIR}/{run['run_id']}.json") for run in runs}
    return {run_id: record for run_id, record in found.items() if record is not None}


def sources(results: Results) -> Sources:
    """The table and each run record in it, with the result kind of its task (parser or relations)."""
    records = run_records(results).items()
    return [(CURVE_JSON, "parser")] + [(f"{RUNS_DIR}/{run_id}.json", record["task"]) for run_id, record in records]


def shown_entries(found: Dict, domain: str = "ewt", metric: str = "las") -> List[Dict]:
    """The table's comparisons of SHOWN on one test set and metric, by size, then comparison."""
    order = {pair: i for i, pair in enumerate(SHOWN)}
    entries = [
        e for e in found.get("comparisons", [])
        if (e["better"], e["worse"]) in order and (e["domain"], e["metric"]) == (domain, metric)
    ]  # fmt: skip
    return sorted(entries, key=lambda e: (e["dataset"], e["n_train"], order[(e["better"], e["worse"])]))


def comparison_entries(entries: Sequence[Dict], better: str, worse: str) -> List[Dict]:
    """The entries of one comparison (row `better` minus row `worse`), in their order."""
    return [e for e in entries if (e["better"], e["worse"]) == (better, worse)]


def run_ids(entry: Dict, seed: int) -> List[str]:
    """The run ids (`attention_curve.Run.run_id`) of the better and the worse row under one seed."""
    return [f"{entry['dataset']}_{entry['size']}_s{seed}_{row}" for row in (entry["better"], entry["worse"])]


def dev_difference(entry: Dict, records: Dict[str, Dict]) -> Optional[float]:
    """Mean over the entry's seeds of the better row's dev LAS (spaCy's, of model-best) minus the worse's."""
    differences = []
    for seed in entry["seeds"]:
        pair = [records.get(run_id) for run_id in run_ids(entry, seed)]
        if None in pair or None in [record["dev_scores"].get("las") for record in pair]:
            return None
        differences.append(pair[0]["dev_scores"]["las"] - pair[1]["dev_scores"]["las"])
    return sum(differences) / len(differences)


def steps_text(entry: Dict, records: Dict[str, Dict]) -> str:
    """The steps the comparison's runs trained (one figure when the budget gave them all the same)."""
    steps = {records[key]["steps"] for seed in entry["seeds"] for key in run_ids(entry, seed) if key in records}
    return ", ".join(map(str, sorted(steps))) or "–"


def goal_text(entries: Sequence[Dict], compact: bool = False) -> str:
    """Whether the study's target is reached anywhere (only ATTENTION_GAINS count), else the largest pooled
    gain of each comparison."""
    entries = [e for e in entries if (e["better"], e["worse"]) in ATTENTION_GAINS]
    reached = [e for e in entries if e.get("at_least_one_point")]
    bar = f"The target, a pooled gain of at least +{GOAL:.1f} LAS with its interval above 0"
    if reached:
        where = ", ".join(f"{e['comparison']} at {e['n_train']:,} sentences ({e['pooled']:+.2f})" for e in reached)
        return f"{bar}: reached by {where}."
    best = []
    for better, worse in ATTENTION_GAINS:
        mine = comparison_entries(entries, better, worse)
        if mine:
            top = max(mine, key=lambda e: e["pooled"])
            best.append(f"{top['comparison']} {top['pooled']:+.2f} at {top['n_train']:,} sentences ({top['verdict']})")
    largest = f" (largest pooled gains: {'; '.join(best)})" if best and not compact else ""
    return f"{bar}: not reached at any size run so far{largest}."


def ptb_text(found: Dict) -> str:
    """The PTB sample's UAS range and emb+att - emb on it, with the convention caveat."""
    points = [p for p in found.get("curve", []) if (p["domain"], p["metric"]) == ("ptb", "uas")]
    if not points:
        return ""
    means = [p["mean"] for p in points]
    entries = [e for e in shown_entries(found, "ptb", "uas") if e["better"] == "att"]
    gains = "; ".join(f"{e['n_train']:,} {e['pooled']:+.2f} ({e['verdict']})" for e in entries)
    return (
        f"PTB sample test UAS of these EWT-trained models: {min(means):.1f} to {max(means):.1f} (means by size and "
        "row), low because the sample attaches words to function heads (modals, prepositions) where UD attaches "
        "them to content words: it measures the convention mismatch more than the domain. emb+att - emb on it, "
        f"pooled, by training sentences: {gains}.\n\n"
    )


HEADER = (
    "EWT test LAS, difference in points; pooled: the mean over seeds, with the paired bootstrap's 95% interval "
    "over test sentences; `holds`: the interval lies above 0; `one seed`: the interval covers the test set's "
    "sampling, not the spread over training seeds. dev: the mean difference of spaCy's dev LAS of model-best "
    "(what the training kept).\n\n"
)
COLUMNS = ("sentences", "steps", "comparison", "seeds", "dev", "test by seed", "pooled", "95% interval", "verdict")


def attention_curve_block(results: Results) -> str:
    """What attention adds by training size, the target, the PTB figures and the runs still missing."""
    found = results.json(CURVE_JSON)
    if found is None:
        return missing_text(results) + "\n\n"
    from spacy_pairatt.study.attention_curve_table import interval_span, sentences

    records, entries = run_records(results), shown_entries(found)
    budget = found.get("budget", {}).get("parser", {}).get("rule")
    rows = [
        (sentences(e["n_train"], e["size"]), steps_text(e, records), e["comparison"], len(e["seeds"]),
         "–" if (dev := dev_difference(e, records)) is None else f"{dev:+.2f}",
         ", ".join(f"{s}: {d:+.2f}" for s, d in zip(e["seeds"], e["by_seed"])), f"{e['pooled']:+.2f}",
         interval_span(e), e["verdict"])
        for e in entries
    ]  # fmt: skip
    relations = [
        f"{r['dataset']}, {sentences(r['n_train'], r['size'])} sentences {r['att_minus_emb']['mean']:+.2f} "
        f"(seeds {', '.join(map(str, r['att_minus_emb']['seeds']))}; "
        + (f"{interval_span(r['att_minus_emb'])}, {r['att_minus_emb']['verdict']})"
           if "verdict" in r["att_minus_emb"] else "no interval)")
        for r in found.get("relations", []) if "att_minus_emb" in r
    ]  # fmt: skip
    text = (f"Parser budget: {budget}.\n\n" if budget else "") + HEADER + table(COLUMNS, rows) + "\n\n"
    text += goal_text(entries) + "\n\n" + ptb_text(found)
    if relations:
        text += (
            "SemEval test macro-F1, emb+att - emb, mean over seeds (with the paired bootstrap's 95% interval): "
            + "; ".join(relations) + ".\n\n"
        )  # fmt: skip
    return text + missing_text(results) + "\n\n" + FROM


def attention_curve_summary_block(results: Results) -> str:
    """The README's version: pooled gains and verdicts in one paragraph, the target, what is missing."""
    found = results.json(CURVE_JSON)
    if found is None:
        return missing_text(results, compact=True) + "\n\n"
    entries, parts = shown_entries(found), []
    for better, worse in ATTENTION_GAINS:
        mine = comparison_entries(entries, better, worse)
        if mine:
            gains = ", ".join(f"{e['n_train']:,} sentences {e['pooled']:+.2f} ({e['verdict']})" for e in mine)
            parts.append(f"{mine[0]['comparison']}: {gains}")
    text = "EWT test LAS gained from attention, pooled over seeds: " + "; ".join(parts) + ". " if parts else ""
    text += goal_text(entries, compact=True) + " " + missing_text(results, compact=True)
    return text + " Tables: docs/attention_curve.md.\n\n"
