"""The attention curve's table (docs/attention_curve.md), from the files `attention_curve.run_curve`
writes: scores by size, row and seed, each comparison's difference per seed and pooled with a paired
bootstrap over test sentences pooled across seeds (`bootstrap.paired_bootstrap_seeds`), the relations
table, and a picture. Scores are percentages, unrounded until printed.
"""

import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from spacy_pairatt.reporting.json_files import read_json
from spacy_pairatt.reporting.tables import cell

from .ablation_table import write_table_files
from .attention_curve import COMPARISONS, DOMAINS, PARSER_ROWS, TASKS, size_label
from .bootstrap import paired_bootstrap_macro_f1, paired_bootstrap_seeds

BOOTSTRAP_SEED = 0
N_RESAMPLES = 10_000


def read_runs(results_dir: Path) -> List[Dict]:
    """Every finished run's record under RESULTS/runs: by task, data, size, seed and row."""
    folder = Path(results_dir) / "runs"
    paths = sorted(path for path in folder.glob("*.json") if not path.name.endswith(".train.json"))
    records = [json.loads(path.read_text(encoding="utf8")) for path in paths]
    return sorted(records, key=lambda r: (r["task"], r["dataset"], r["n_train"], r["seed"], ROW_ORDER.get(r["row"], 9)))


def size_key(record: Dict) -> Tuple[int, str]:
    """Sort key and label of a run's size: the number of sentences, "full" for the whole set."""
    return record["n_train"], size_label(record["size"])


def curve_points(records: Sequence[Dict]) -> List[Dict]:
    """Parser scores grouped by size, row, domain and metric: each seed's score and their mean."""
    groups: Dict[Tuple, Dict] = {}
    for record in records:
        if record["task"] != "parser":
            continue
        for domain, scores in record["test"].items():
            for metric in DOMAINS[domain].metrics if domain in DOMAINS else ("uas", "las"):
                if scores.get(metric) is None:
                    continue
                key = (record["dataset"], record["n_train"], size_label(record["size"]), record["row"], domain, metric)
                groups.setdefault(key, {})[record["seed"]] = scores[metric]
    points = []
    for (dataset, n_train, label, row, domain, metric), by_seed in sorted(groups.items(), key=point_order):
        seeds = sorted(by_seed)
        points.append({
            "dataset": dataset, "n_train": n_train, "size": label, "row": row, "domain": domain, "metric": metric,
            "seeds": seeds, "scores": [by_seed[seed] for seed in seeds],
            "mean": float(np.mean([by_seed[seed] for seed in seeds])),
        })  # fmt: skip
    return points


ROW_ORDER = {row.key: i for i, row in enumerate(PARSER_ROWS)}
METRIC_ORDER = {"uas": 0, "las": 1}


def point_order(item: Tuple[Tuple, Dict]) -> Tuple:
    """Data, size, test set, metric (UAS first), then the rows in PARSER_ROWS order."""
    dataset, n_train, _, row, domain, metric = item[0]
    return dataset, n_train, domain, METRIC_ORDER.get(metric, 2), ROW_ORDER.get(row, len(ROW_ORDER))


def verdict(interval: Dict, n_seeds: int) -> str:
    """`holds` only when the whole 95% interval lies above 0, `reversed` when below.

    The interval covers the test set's sampling with the trained models fixed, not training seeds,
    whose spread at one size is as large as the differences here; a verdict on one seed says so.
    """
    word = "holds" if interval["low"] > 0 else "reversed" if interval["high"] < 0 else "not shown"
    return f"{word}, one seed" if n_seeds == 1 and word != "not shown" else word


def comparisons(records: Sequence[Dict], results_dir: Path, n_resamples: int = N_RESAMPLES) -> List[Dict]:
    """Each of COMPARISONS at each parser size, domain and metric where both rows ran under a
    shared seed: the difference per seed, pooled (their mean), and the paired bootstrap interval of
    the pooled difference over the test sentences (one draw for every seed and both rows)."""
    by_key = {(r["dataset"], r["n_train"], r["row"], r["seed"]): r for r in records if r["task"] == "parser"}
    entries = []
    for dataset, n_train in sorted({(key[0], key[1]) for key in by_key}):
        for better, worse in COMPARISONS:
            seeds = sorted(
                seed for (d, n, row, seed) in by_key if (d, n, row) == (dataset, n_train, better)
                and (dataset, n_train, worse, seed) in by_key
            )  # fmt: skip
            if not seeds:
                continue
            pairs = [(by_key[(dataset, n_train, better, s)], by_key[(dataset, n_train, worse, s)]) for s in seeds]
            for domain in pairs[0][0]["test"]:
                metrics = DOMAINS[domain].metrics if domain in DOMAINS else ("uas", "las")
                for metric in metrics:
                    entries.append(compare(pairs, domain, metric, results_dir, n_resamples))
    return entries


def compare(pairs: Sequence[Tuple[Dict, Dict]], domain: str, metric: str, results_dir: Path, n_resamples: int) -> Dict:
    """One comparison of `comparisons`: (better, worse) records under each shared seed."""
    better, worse = pairs[0]
    differences = [b["test"][domain][metric] - w["test"][domain][metric] for b, w in pairs]
    entry = {
        "dataset": better["dataset"], "n_train": better["n_train"], "size": size_label(better["size"]),
        "better": better["row"], "worse": worse["row"], "comparison": f"{better['row_name']} - {worse['row_name']}",
        "domain": domain, "metric": metric, "seeds": [b["seed"] for b, _ in pairs],
        "by_seed": differences, "pooled": float(np.mean(differences)),
        "ahead_in_every_seed": all(difference > 0 for difference in differences),
    }  # fmt: skip
    arcs = [[read_json(Path(results_dir) / r["test"][domain].get("arcs", "-")) for r in pair] for pair in pairs]
    if all(counts is not None for pair in arcs for counts in pair):
        interval = paired_bootstrap_seeds(
            [pair[0] for pair in arcs], [pair[1] for pair in arcs], metric, n_resamples, BOOTSTRAP_SEED
        )
        entry["bootstrap"] = {key: interval[key] for key in ("low", "high", "p_not_better", "n_resamples", "n_docs")}
        entry["verdict"] = verdict(interval, len(pairs))
        entry["at_least_one_point"] = interval["low"] > 0 and entry["pooled"] >= 1.0
    else:
        entry["verdict"] = "no interval (arc counts missing)"
    return entry


def relation_rows(records: Sequence[Dict], results_dir: Path, n_resamples: int = N_RESAMPLES) -> List[Dict]:
    """SemEval runs by dataset (with or without markers), size and row: official macro-F1 per seed
    and mean, and emb+att - emb per shared seed, pooled, with the paired bootstrap interval over test
    sentences (one draw for every seed and both rows) where every run kept its per-sentence labels."""
    groups: Dict[Tuple, Dict[str, Dict[int, Dict]]] = {}
    for record in records:
        if record["task"] != "relations":
            continue
        key = (record["dataset"], record["n_train"], size_label(record["size"]))
        for domain, scores in record["test"].items():
            groups.setdefault(key + (domain,), {}).setdefault(record["row"], {})[record["seed"]] = scores
    rows = []
    for (dataset, n_train, label, domain), by_row in sorted(groups.items()):
        entry = {"dataset": dataset, "n_train": n_train, "size": label, "domain": domain, "rows": {}}
        for row, by_seed in by_row.items():
            entry["rows"][row] = {
                "seeds": sorted(by_seed),
                "macro_f1": [by_seed[s]["macro_f1"] for s in sorted(by_seed)],
                "mean": float(np.mean([scores["macro_f1"] for scores in by_seed.values()])),
            }
        shared = sorted(set(by_row.get("att", {})) & set(by_row.get("emb", {})))
        if shared:
            differences = [by_row["att"][s]["macro_f1"] - by_row["emb"][s]["macro_f1"] for s in shared]
            entry["att_minus_emb"] = {
                "seeds": shared,
                "by_seed": differences,
                "mean": float(np.mean(differences)),
                "ahead_in_every_seed": all(d > 0 for d in differences),
            }
            labels = [
                [read_json(Path(results_dir) / by_row[row][s].get("labels", "-")) for row in ("att", "emb")]
                for s in shared
            ]
            if all(kept is not None for pair in labels for kept in pair):
                interval = paired_bootstrap_macro_f1(
                    [pair[0] for pair in labels], [pair[1] for pair in labels], n_resamples, BOOTSTRAP_SEED
                )
                entry["att_minus_emb"]["bootstrap"] = {
                    key: interval[key] for key in ("low", "high", "p_not_better", "n_resamples", "n_docs")
                }
                entry["att_minus_emb"]["verdict"] = verdict(interval, len(shared))
        rows.append(entry)
    return rows


def run_summary(record: Dict) -> Dict:
    """What the runs table shows of a record, provenance included."""
    code = record["provenance"]["code"]
    return {
        "run_id": record["run_id"], "task": record["task"], "row": record["row_name"], "n_train": record["n_train"],
        "subset_seed": (record.get("subset") or {}).get("seed"), "seed": record["seed"], "steps": record["steps"],
        "train_seconds": record["train_seconds"], "dev": record["dev_scores"],
        "test": {domain: {k: v for k, v in scores.items() if k not in ("arcs", "evaluation")}
                 for domain, scores in record["test"].items()},
        "device": training_device(record), "command": record["command"], "commit": code.get("commit"),
        "dirty": code.get("dirty"), "created": record["provenance"]["created"],
    }  # fmt: skip


def training_device(record: Dict) -> str:
    """Where a run trained, from its `spacy train` command's --gpu-id and the machine in its
    provenance: train seconds are comparable only between runs on the same device."""
    gpu = re.search(r"--gpu-id (-?\d+)", record["command"])
    provenance = record.get("train_provenance") or record["provenance"]
    device = f"CPU, {provenance['cores']} cores" if provenance.get("cores") else "CPU"
    if gpu is not None and int(gpu.group(1)) >= 0:
        device = "GPU"
    at_once = record.get("trainings_at_once", 1)
    return device if at_once == 1 else f"{device}, {at_once} at once"


def curve_table(results_dir: Path, n_resamples: int = N_RESAMPLES) -> Dict:
    records = read_runs(results_dir)
    return {
        "unit": "percent",
        "budget": {task.key: {**asdict(task.budget), "rule": task.budget.rule()} for task in TASKS.values()},
        "bootstrap": {"n_resamples": n_resamples, "seed": BOOTSTRAP_SEED},
        "curve": curve_points(records),
        "comparisons": comparisons(records, results_dir, n_resamples),
        "relations": relation_rows(records, results_dir, n_resamples),
        "runs": [run_summary(record) for record in records],
    }


def sentences(n_train: int, size: str) -> str:
    return f"{n_train:,}" + (" (all)" if size == "full" else "")


def curve_markdown(table: Dict, png: Optional[str] = None, title: str = "") -> str:
    parts = [title + "\n"] if title else []
    parts.append(
        "Where attention pays: "
        "the default parser (`parser_minilm.cfg`, biaffine, MST) with `use_attention` false (emb) and "
        "true (emb+att), and `parser_minilm_ftatt.cfg` (ft:emb+att), trained on seeded random subsets of UD "
        "English-EWT train (the subset's seed is the training seed: both rows at a size and seed see the same "
        "sentences); scored on EWT test (UAS/LAS) and on the PTB sample's test split (UAS: heads only) as "
        "out-of-domain text; percentages without punctuation. Budget: "
        f"{table['budget']['parser']['rule']} (relations: {table['budget']['relations']['rule']}). "
        "Method and commands: docs/attention_curve.md.\n"
    )
    if not table["runs"]:
        command = "python -m spacy project run attention-curve projects/paper"
        parts.append(f"**No runs yet: results pending** (`{command}`).\n")
        return "\n".join(parts)
    if png:
        parts.append(f"![LAS on EWT and UAS on the PTB sample against training size]({png})\n")
    parts.append(curve_points_markdown(table["curve"]))
    parts.append(comparisons_markdown(table["comparisons"], table["bootstrap"]))
    if table["relations"]:
        parts.append(relations_markdown(table["relations"]))
    parts.append(runs_markdown(table["runs"]))
    return "\n".join(parts)


def curve_points_markdown(points: Sequence[Dict]) -> str:
    lines = [
        "## Scores by training size (test; mean over seeds, then each seed)\n",
        "| data | sentences | row | test set | metric | seeds | mean | by seed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        by_seed = ", ".join(f"{seed}: {score:.1f}" for seed, score in zip(p["seeds"], p["scores"]))
        lines.append(
            f"| {p['dataset']} | {sentences(p['n_train'], p['size'])} | {p['row']} | {p['domain']} | "
            f"{p['metric'].upper()} | {len(p['seeds'])} | {p['mean']:.1f} | {by_seed} |"
        )
    return "\n".join(lines) + "\n"


def interval_span(entry: Dict) -> str:
    """An entry's bootstrap interval as "low to high" in points, "–" without one."""
    interval = entry.get("bootstrap")
    return "–" if interval is None else f"{interval['low']:+.2f} to {interval['high']:+.2f}"


def comparisons_markdown(entries: Sequence[Dict], bootstrap: Dict) -> str:
    lines = [
        "## Differences (points, test)\n",
        "Per seed and pooled (the mean over seeds); the 95% interval and p (the share of resamples in which "
        f"the first row does not score higher) come from a paired bootstrap over test sentences "
        f"({bootstrap['n_resamples']:,} resamples, seed {bootstrap['seed']}), one draw of sentences for every seed "
        "and both rows, pooled across seeds. It measures the test set's sampling with the trained models fixed; the "
        "spread over seeds is in the by-seed column. `holds`: the interval lies above 0; `reversed`: below 0; "
        "`not shown`: it spans 0; `one seed`: a verdict on one training seed, whose interval says nothing of the "
        "spread over seeds. ≥1: pooled ≥ +1.0 with the interval above 0, the target where the second row is "
        "emb (no attention).\n",
        "| data | sentences | comparison | test set | metric | by seed | pooled | 95% interval | p | verdict | ≥1 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        by_seed = ", ".join(f"{seed}: {value:+.2f}" for seed, value in zip(e["seeds"], e["by_seed"]))
        interval = e.get("bootstrap")
        span = interval_span(e)
        p_value = "–" if interval is None else f"{interval['p_not_better']:.3f}"
        goal = "yes" if e.get("at_least_one_point") else "no"
        lines.append(
            f"| {e['dataset']} | {sentences(e['n_train'], e['size'])} | {e['comparison']} | {e['domain']} | "
            f"{e['metric'].upper()} | {by_seed} | {e['pooled']:+.2f} | {span} | {p_value} | {e['verdict']} | {goal} |"
        )
    return "\n".join(lines) + "\n"


def relations_markdown(rows: Sequence[Dict]) -> str:
    lines = [
        "## Relations: SemEval-2010 Task 8, official macro-F1 (test)\n",
        "`semeval`: entities given as spans only (the paper's setting); `semeval_markers`: with `$ e1 $`, `# e2 #` "
        "in the text. Mean over seeds, then each seed; the interval: the paired bootstrap over test sentences, "
        "one draw for every seed and both rows, of the mean difference (where the runs kept each sentence's "
        "labels).\n",
        "| data | sentences | emb | emb+att | emb+att - emb by seed | mean difference | 95% interval | verdict "
        "| ahead in every seed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [seed_scores(r["rows"].get(row)) for row in ("emb", "att")]
        diff = r.get("att_minus_emb")
        by_seed = "–" if diff is None else ", ".join(f"{s}: {d:+.2f}" for s, d in zip(diff["seeds"], diff["by_seed"]))
        mean = "–" if diff is None else f"{diff['mean']:+.2f}"
        every = "–" if diff is None else ("yes" if diff["ahead_in_every_seed"] else "no")
        interval = "–" if diff is None else interval_span(diff)
        judged = "–" if diff is None else diff.get("verdict", "no interval (labels missing)")
        lines.append(
            f"| {r['dataset']} | {sentences(r['n_train'], r['size'])} | {cells[0]} | {cells[1]} | {by_seed} | "
            f"{mean} | {interval} | {judged} | {every} |"
        )
    return "\n".join(lines) + "\n"


def seed_scores(scores: Optional[Dict]) -> str:
    if scores is None:
        return "not run"
    by_seed = ", ".join(f"{seed}: {value:.1f}" for seed, value in zip(scores["seeds"], scores["macro_f1"]))
    return f"{scores['mean']:.1f} ({by_seed})"


SCORE_NAMES = {"uas": "UAS", "las": "LAS", "macro_f1": "macro-F1"}


def runs_markdown(runs: Sequence[Dict]) -> str:
    lines = [
        "## Runs\n",
        "One line a model: its training sentences, the seed that drew the subset and the training seed, steps, "
        "the wall time of `spacy train` and where it ran (`curve-run --jobs`: several trainings at once), "
        "spaCy's dev scores of model-best, test scores, and where it came from "
        "(commit, `+dirty` for uncommitted code, time). Commands: `runs` in the JSON.\n",
        "| run | row | sentences | subset seed | seed | steps | train s | device | dev | test | commit | created |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        dev = ", ".join(f"{name.upper().replace('_', '-')} {cell(value)}" for name, value in run["dev"].items())
        test = "; ".join(
            f"{domain} "
            + ", ".join(f"{SCORE_NAMES[k]} {cell(v)}" for k, v in scores.items() if v is not None and k in SCORE_NAMES)
            for domain, scores in run["test"].items()
        )
        commit = "–" if run["commit"] is None else run["commit"][:8] + ("+dirty" if run["dirty"] else "")
        lines.append(
            f"| {run['run_id']} | {run['row']} | {run['n_train']:,} | {cell(run['subset_seed'], 0)} | {run['seed']} | "
            f"{run['steps']} | {cell(run['train_seconds'], 0)} | {run['device']} | {dev} | {test} | {commit} | "
            f"{run['created']} |"
        )
    return "\n".join(lines) + "\n"


ROW_COLOURS = {"emb": "tab:blue", "att": "tab:orange", "ftatt": "tab:green"}
JITTER = {"emb": 0.94, "att": 1.0, "ftatt": 1.06}
PANELS = (("ewt", "las", "LAS, UD English-EWT test"), ("ptb", "uas", "UAS, PTB sample test (out of domain)"))


def curve_figure(points: Sequence[Dict]):
    """LAS on EWT and UAS on the PTB sample against training sentences (log axis): each row's seeds
    as small points, their mean as a line."""
    from .visualize import require_figure

    figure = require_figure()(figsize=(10, 4), layout="constrained")
    for axis, (domain, metric, title) in zip(figure.subplots(1, 2), PANELS):
        for row, colour in ROW_COLOURS.items():
            mine = sorted(
                (p for p in points if (p["domain"], p["metric"], p["row"]) == (domain, metric, row)),
                key=lambda p: p["n_train"],
            )
            if not mine:
                continue
            shift = JITTER[row]  # the rows' seed dots side by side, not on top of each other
            for p in mine:
                axis.scatter([p["n_train"] * shift] * len(p["scores"]), p["scores"], color=colour, s=12, alpha=0.5)
            label = {"emb": "emb", "att": "emb+att", "ftatt": "ft:emb+att"}[row]
            axis.plot([p["n_train"] for p in mine], [p["mean"] for p in mine], color=colour, marker="o", label=label)
        axis.set_xscale("log")
        sizes = sorted({p["n_train"] for p in points})
        axis.set_xticks(sizes, [f"{size:,}" for size in sizes])
        axis.minorticks_off()
        axis.set_xlabel("training sentences (log scale)")
        axis.set_ylabel(f"{metric.upper()} (%)")
        axis.set_title(title, fontsize=10)
        axis.grid(alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=8, title="mean over seeds; dots: seeds", title_fontsize=8)
    return figure


def write_curve_table(
    results_dir: str, output: Optional[str] = None, json_output: Optional[str] = None, png: Optional[str] = None,
    title: str = "", n_resamples: int = N_RESAMPLES,
) -> str:  # fmt: skip
    """Write the markdown, the JSON and the picture from RESULTS/runs; returns the markdown."""
    from .visualize import save_figure

    table = curve_table(Path(results_dir), n_resamples)
    png_link = None
    if png and table["curve"]:
        save_figure(curve_figure(table["curve"]), Path(png))
        png_link = Path(png).name if output and Path(png).parent == Path(output).parent else png
    text = curve_markdown(table, png_link, title)
    write_table_files(table, text, output, json_output, BOOTSTRAP_SEED)
    return text
