"""The attention curve's blocks (docs/attention_curve.md, docs/ablation.md, README.md): what attention adds to
the parser's EWT test LAS at each training size, read from results/attention_curve.json and the run records
behind it, and which runs of the `attention-curve` workflow (its plan in plan.json, which a test ties to
project.yml) are not in the table yet; their prose in templates/curve_blocks.md."""

from dataclasses import replace
from typing import Dict, List, Sequence, Tuple

from .blocks import Prose, paragraphs
from .plan import PLAN
from .results import Results, Sources

PROSE = Prose("curve_blocks.md")
CURVE = PLAN["attention_curve"]
CURVE_JSON, RUNS_DIR, WORKFLOW = CURVE["table"], CURVE["runs"], CURVE["workflow"]
# The comparisons the blocks show (better, worse): what attention adds, as a feature and fine-tuned through,
# and what fine-tuning through it adds to the feature alone.
SHOWN = (("att", "emb"), ("ftatt", "emb"), ("ftatt", "att"))
ATTENTION_GAINS = tuple(pair for pair in SHOWN if pair[1] == "emb")  # against emb, the row without attention
GOAL = 1.0  # the study's target: pooled gain in LAS points, with the interval above 0
RUN_KEYS = ("task", "dataset", "rows", "sizes", "seeds")  # a planned command's; its "budget": Budget's fields


def planned() -> List[Tuple]:
    """(Run, its Budget) of every run of the workflow's `curve-run` commands, in its order."""
    from spacy_pairatt.study.attention_curve import TASKS, plan_runs

    runs = []
    for command in CURVE["planned"]:
        budget = replace(TASKS[command["task"]].budget, **command["budget"])
        runs += [(run, budget) for run in plan_runs(**{key: command[key] for key in RUN_KEYS})]
    return runs


def missing_runs(results: Results) -> List[Dict]:
    """The planned runs the table lacks (also a run trained to other steps than the plan's budget gives its
    size), as groups of one task, data and size whose rows x seeds are exactly the missing runs."""
    from spacy_pairatt.study.attention_curve import TASKS, size_label

    present = {run["run_id"]: run for run in (results.json(CURVE_JSON) or {}).get("runs", [])}
    seeds_of_row: Dict[Tuple, Tuple] = {}  # (task, data, size, row) -> (a run, its missing seeds)
    for run, budget in planned():
        record = present.get(run.run_id)
        if record is None or record["steps"] != budget.steps(record["n_train"]):
            _, seeds = seeds_of_row.setdefault((run.task, run.dataset, size_label(run.size), run.row), (run, []))
            seeds += [run.seed] if run.seed not in seeds else []
    groups: Dict[Tuple, Dict] = {}
    for (task, dataset, size, row), (run, seeds) in seeds_of_row.items():
        group = {"task": task, "dataset": dataset, "size": run.size, "rows": [], "seeds": seeds}
        groups.setdefault((task, dataset, size, tuple(seeds)), group)["rows"].append(TASKS[task].row(row).name)
    return list(groups.values())


def missing_text(results: Results, compact: bool = False) -> str:
    """The planned runs not in the table yet (compact: without their seeds)."""
    parts = []
    for g in missing_runs(results):
        seeds = "" if compact else f"; seed{'s' if len(g['seeds']) > 1 else ''} {', '.join(map(str, g['seeds']))}"
        size = "all" if g["size"] is None else f"{g['size']:,}"
        parts.append(f"{g['task']} on {g['dataset']}, {size} sentences ({', '.join(g['rows'])}{seeds})")
    return PROSE("missing", workflow=WORKFLOW, runs="; ".join(parts)) if parts else PROSE("complete", workflow=WORKFLOW)


def run_records(results: Results) -> Dict[str, Dict]:
    """The record behind each run of the table, by run id (runs without one are left out)."""
    runs = (results.json(CURVE_JSON) or {}).get("runs", [])
    found = {run["run_id"]: results.json(f"{RUNS_DIR}/{run['run_id']}.json") for run in runs}
    return {run_id: record for run_id, record in found.items() if record is not None}


def sources(results: Results, block=None) -> Sources:
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


def curve_row(entry: Dict, records: Dict[str, Dict]) -> Dict:
    """An entry's row of the table, with the steps its runs trained (one figure when the budget gave them all the
    same) and `dev`, the mean over its seeds of the better row's dev LAS (spaCy's, of model-best) minus the
    worse's (None where a run record lacks it)."""
    from spacy_pairatt.study.attention_curve_table import interval_span, sentences

    pairs = [
        [records.get(f"{entry['dataset']}_{entry['size']}_s{seed}_{row}") for row in (entry["better"], entry["worse"])]
        for seed in entry["seeds"]
    ]
    steps = ", ".join(map(str, sorted({record["steps"] for pair in pairs for record in pair if record})))
    las = [[(record or {}).get("dev_scores", {}).get("las") for record in pair] for pair in pairs]
    dev = None if any(None in pair for pair in las) else sum(better - worse for better, worse in las) / len(las)
    test_by_seed = ", ".join(f"{seed}: {gain:+.2f}" for seed, gain in zip(entry["seeds"], entry["by_seed"]))
    return {
        **entry, "sentences": sentences(entry["n_train"], entry["size"]), "steps": steps or "–", "dev": dev,
        "seed_count": len(entry["seeds"]), "test_by_seed": test_by_seed, "interval": interval_span(entry),
    }  # fmt: skip


def goal_text(entries: Sequence[Dict], compact: bool = False) -> str:
    """Whether the study's target is reached anywhere (only ATTENTION_GAINS count), else the largest pooled
    gain of each comparison."""
    entries = [e for e in entries if (e["better"], e["worse"]) in ATTENTION_GAINS]
    reached = [e for e in entries if e.get("at_least_one_point")]
    if reached:
        where = ", ".join(f"{e['comparison']} at {e['n_train']:,} sentences ({e['pooled']:+.2f})" for e in reached)
        return PROSE("goal-reached", goal=GOAL, where=where)
    tops = [
        max(mine, key=lambda e: e["pooled"]) for pair in ATTENTION_GAINS if (mine := comparison_entries(entries, *pair))
    ]
    best = "; ".join(
        f"{e['comparison']} {e['pooled']:+.2f} at {e['n_train']:,} sentences ({e['verdict']})" for e in tops
    )
    largest = PROSE("largest-gains", gains=best) if tops and not compact else ""
    return PROSE("goal-not-reached", goal=GOAL, largest=largest)


def ptb_text(found: Dict) -> str:
    """The PTB sample's UAS range and emb+att - emb on it, with the convention caveat."""
    means = [p["mean"] for p in found.get("curve", []) if (p["domain"], p["metric"]) == ("ptb", "uas")]
    if not means:
        return ""
    entries = [e for e in shown_entries(found, "ptb", "uas") if e["better"] == "att"]
    gains = "; ".join(f"{e['n_train']:,} {e['pooled']:+.2f} ({e['verdict']})" for e in entries)
    return PROSE("ptb", low=min(means), high=max(means), gains=gains)


def relations_text(found: Dict) -> str:
    """SemEval's emb+att - emb at each size the curve ran."""
    from spacy_pairatt.study.attention_curve_table import interval_span, sentences

    gains = [
        PROSE("relations-gain", run=run, sentences=sentences(run["n_train"], run["size"]), gain=gain,
              seeds=", ".join(map(str, gain["seeds"])),
              interval=f"{interval_span(gain)}, {gain['verdict']}" if "verdict" in gain else "no interval")
        for run in found.get("relations", []) if (gain := run.get("att_minus_emb"))
    ]  # fmt: skip
    return PROSE("relations", gains="; ".join(gains)) if gains else ""


def attention_curve_block(results: Results, block) -> str:
    """What attention adds by training size, the target, the PTB figures and the runs still missing."""
    found = results.json(CURVE_JSON)
    if found is None:
        return paragraphs(missing_text(results))
    records, entries = run_records(results), shown_entries(found)
    budget = found.get("budget", {}).get("parser", {}).get("rule")
    return paragraphs(
        budget and PROSE("budget", budget=budget),
        PROSE("header"),
        PROSE.table("curve", [curve_row(entry, records) for entry in entries]),
        goal_text(entries),
        ptb_text(found),
        relations_text(found),
        missing_text(results),
        PROSE("from", curve=CURVE_JSON, runs=RUNS_DIR),
    )


def attention_curve_summary_block(results: Results, block) -> str:
    """The README's version: pooled gains and verdicts in one paragraph, the target, what is missing."""
    found = results.json(CURVE_JSON)
    if found is None:
        return paragraphs(missing_text(results, compact=True))
    entries, gains = shown_entries(found), []
    for better, worse in ATTENTION_GAINS:
        mine = comparison_entries(entries, better, worse)
        if mine:
            sizes = ", ".join(f"{e['n_train']:,} sentences {e['pooled']:+.2f} ({e['verdict']})" for e in mine)
            gains.append(f"{mine[0]['comparison']}: {sizes}")
    gains = PROSE("summary-gains", gains="; ".join(gains)) + " " if gains else ""
    goal, missing = goal_text(entries, compact=True), missing_text(results, compact=True)
    return paragraphs(PROSE("summary", gains=gains, goal=goal, missing=missing))
