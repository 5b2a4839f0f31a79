"""Table 1 from the ablation's results files: each row's scores beside the paper's, the orderings
the paper claims with paired-bootstrap intervals, the spread over training seeds, as markdown and JSON
(docs/ablation.md). The rows and their training: ablation.py."""

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from spacy_pairatt.reporting.json_files import read_json, write_json
from spacy_pairatt.reporting.provenance import provenance
from spacy_pairatt.reporting.tables import cell

from .ablation import DATASETS, METRICS, ROWS, ROWS_BY_KEY, Dataset, percent_scores
from .bootstrap import paired_bootstrap

PAPER = "Meng et al. 2019, Table 1: BERT-base, full PTB (Stanford dependencies), UAS/LAS without punctuation"
BOOTSTRAP_SEED = 0


@dataclass(frozen=True)
class Ordering:
    """A comparison of two rows on test UAS (and LAS where there are labels): whether `better`
    scores above `worse`. The first three are the paper's claims; the fourth asks of the MLM row
    what the paper's figures answer no to; the last sets our best pairatt row against the
    transition reference (no paper figure)."""

    claim: str
    better: str
    worse: str


ORDERINGS = (
    Ordering("attention helps feature-based", "fea_emb_att", "fea_emb"),
    Ordering("attention helps fine-tuning", "ft_emb_att", "ft_emb"),
    Ordering("MST helps", "ft_emb_att_mst", "ft_emb_att"),
    Ordering("MLM adaptation helps feature-based", "fea_mlm_emb_att", "fea_emb_att"),
    Ordering("pairatt beats the transition parser", "ft_emb_att_mst", "transition"),
)


def dataset_rows(results_dir: Path, dataset: Dataset) -> List[Dict]:
    """Every row of one dataset with what its files hold (None where a file is missing)."""
    folder = results_dir / dataset.key
    records = []
    for row in ROWS:
        train = read_json(folder / f"{row.training}_train.json")
        records.append(
            {
                "key": row.key,
                "row": row.name,
                "description": row.description,
                "config": row.config,
                "decoder": row.decoder,
                "encoder": train and train["encoder"],
                "steps": train and train["steps"],
                "seed": train and train["seed"],
                "learn_rate": train and train.get("learn_rate"),
                "train_seconds": train and train["seconds"],
                "dev": percent_scores(read_json(folder / f"{row.key}_dev.json"), dataset.labelled),
                "test": percent_scores(read_json(folder / f"{row.key}_test.json"), dataset.labelled),
                "paper": {"uas": row.paper_uas, "las": row.paper_las},
            }
        )
    return records


def ordering_verdict(better: Optional[float], worse: Optional[float]) -> Dict:
    """Whether `better` > `worse`, and by how much (exact: rounded only where printed); "not measured"
    when either is missing."""
    if better is None or worse is None:
        return {"verdict": "not measured", "difference": None}
    return {"verdict": "holds" if better > worse else "does not hold", "difference": better - worse}


def within_noise(interval: Dict) -> bool:
    """Whether the bootstrap interval spans 0: the test set cannot tell which row is better."""
    return interval["low"] <= 0 <= interval["high"]


def orderings(records: Dict[str, List[Dict]], results_dir: Path) -> List[Dict]:
    """Each comparison in ORDERINGS on the paper's figures and on each dataset's test scores, per
    metric ({"uas": verdict, "las": verdict}), with a paired bootstrap interval where both rows'
    test arc counts are there."""
    results = []
    for ordering in ORDERINGS:
        better, worse = ROWS_BY_KEY[ordering.better], ROWS_BY_KEY[ordering.worse]
        entry = {
            "claim": ordering.claim,
            "comparison": f"{better.name} > {worse.name}",
            "paper": {
                metric: ordering_verdict(getattr(better, f"paper_{metric}"), getattr(worse, f"paper_{metric}"))
                for metric in METRICS
            },
        }
        for dataset in DATASETS:
            test = {record["key"]: record["test"] or {} for record in records[dataset.key]}
            arcs = [read_json(results_dir / dataset.key / f"{key}_test_arcs.json") for key in (better.key, worse.key)]
            entry[dataset.key] = {}
            for metric in dataset.metrics:
                verdict = ordering_verdict(test[better.key].get(metric), test[worse.key].get(metric))
                if verdict["difference"] is not None and None not in arcs:
                    interval = paired_bootstrap(*arcs, metric=metric, seed=BOOTSTRAP_SEED)
                    verdict["bootstrap"] = {**interval, "within_noise": within_noise(interval)}
                entry[dataset.key][metric] = verdict
        results.append(entry)
    return results


def folder_records(results_dir: Path) -> Dict[str, List[Dict]]:
    """Every dataset's rows (`dataset_rows`) of one results folder."""
    if not results_dir.is_dir():
        raise ValueError(f"results folder {results_dir} does not exist")
    return {dataset.key: dataset_rows(results_dir, dataset) for dataset in DATASETS}


def seed_spread(folders: Sequence[Tuple[Path, Dict[str, List[Dict]]]]) -> List[Dict]:
    """Each ordering's test difference in every results folder (with its `folder_records`) where both
    of its rows were run, one training seed a folder (`ablation-run --seed S --results-dir DIR`): the
    spread over seeds, which the bootstrap over test sentences does not measure. Only comparisons run
    under two seeds or more."""
    rows_by_key = [
        (folder, {key: {row["key"]: row for row in rows} for key, rows in records.items()})
        for folder, records in folders
    ]
    spread = []
    for ordering in ORDERINGS:
        for dataset in DATASETS:
            for metric in dataset.metrics:
                runs: Dict[int, Dict] = {}
                for folder, rows in rows_by_key:
                    better, worse = (rows[dataset.key][key] for key in (ordering.better, ordering.worse))
                    scores = [(record["test"] or {}).get(metric) for record in (better, worse)]
                    verdict = ordering_verdict(*scores)
                    if verdict["difference"] is None:
                        continue
                    if better["seed"] != worse["seed"]:
                        raise ValueError(
                            f"{folder}/{dataset.key}: {ordering.better} was trained with seed {better['seed']}, "
                            f"{ordering.worse} with seed {worse['seed']}; a folder holds one seed's rows"
                        )
                    if better["seed"] in runs:
                        raise ValueError(
                            f"{runs[better['seed']]['results_dir']} and {folder} both hold seed {better['seed']} "
                            f"of {dataset.key} {ordering.better}; give each seed its own results folder"
                        )
                    runs[better["seed"]] = {
                        "results_dir": str(folder), "seed": better["seed"], "difference": verdict["difference"],
                        "better": scores[0], "worse": scores[1],
                    }  # fmt: skip
                if len(runs) < 2:
                    continue
                differences = [run["difference"] for run in runs.values()]
                spread.append(
                    {
                        "claim": ordering.claim,
                        "comparison": f"{ROWS_BY_KEY[ordering.better].name} > {ROWS_BY_KEY[ordering.worse].name}",
                        "dataset": dataset.key,
                        "metric": metric,
                        "runs": sorted(runs.values(), key=lambda run: run["seed"]),
                        "mean": sum(differences) / len(differences),
                        "holds_in_every_seed": all(difference > 0 for difference in differences),
                    }
                )
    return spread


def ablation_table(results_dir: Path, replicates: Sequence[Path] = ()) -> Dict:
    """Everything the markdown shows, from `results_dir`/{ewt,ptb}/*.json and, for the spread over
    training seeds, the same files of each replicate folder (another seed each)."""
    folders = [(Path(folder), folder_records(Path(folder))) for folder in (results_dir, *replicates)]
    records = folders[0][1]
    return {
        "unit": "percent",
        "paper": PAPER,
        "datasets": {dataset.key: {"name": dataset.name, "rows": records[dataset.key]} for dataset in DATASETS},
        "orderings": orderings(records, Path(results_dir)),
        "seed_spread": seed_spread(folders),
    }


def verdict_text(verdict: Dict) -> str:
    """Two decimals: on the PTB test split one word is 0.02 points, which one decimal shows as 0.0.
    A verdict whose interval spans 0 says so, so that a point estimate is not read as a finding."""
    if verdict["difference"] is None:
        return verdict["verdict"]
    interval = verdict.get("bootstrap")
    if interval is None:
        return f"{verdict['verdict']} ({verdict['difference']:+.2f})"
    qualifier = ", within the test set's noise" if within_noise(interval) else ""
    return (
        f"{verdict['verdict']}{qualifier} ({verdict['difference']:+.2f}; 95% interval {interval['low']:+.2f} to "
        f"{interval['high']:+.2f}, p = {interval['p_not_better']:.3f})"
    )


def dataset_markdown(dataset: Dataset, rows: List[Dict]) -> str:
    metrics = ("uas", "las") if dataset.labelled else ("uas",)
    score_heads = [f"{split} {metric.upper()}" for split in ("dev", "test") for metric in metrics]
    heads = ["row", "encoder", "decoder", "steps", "seed", "lr", "train s", *score_heads, "test trees"]
    heads += ["paper UAS", "paper LAS"]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for row in rows:
        scores = [cell((row[split] or {}).get(metric)) for split in ("dev", "test") for metric in metrics]
        lines.append(
            "| "
            + " | ".join(
                [
                    row["row"],
                    row["encoder"] or "not run",
                    row["decoder"] or "transition",
                    cell(row["steps"], 0),
                    cell(row["seed"], 0),
                    "–" if row["learn_rate"] is None else f"{row['learn_rate']:g}",
                    cell(row["train_seconds"], 0),
                    *scores,
                    cell((row["test"] or {}).get("trees")),
                    cell(row["paper"]["uas"]),
                    cell(row["paper"]["las"]),
                ]
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def ablation_markdown(table: Dict, title: str = "") -> str:
    """Per-dataset tables beside the paper's figures, then the orderings on test UAS and LAS."""
    parts = [title + "\n"] if title else []
    parts.append(
        f"Paper: {table['paper']}. Our scores are percentages without punctuation; the paper's "
        "columns are its full-PTB figures on BERT-base, shown for direction, not for comparison. "
        "Rows other than `(mst)` decode greedily (each word's best head); `ft:emb+att (mst)` is the "
        "same model as `ft:emb+att` decoded with MST. model-best is chosen on dev; test is read once "
        "per row. `lr`: the initial learning rate of the row's config. `train s` is the wall time of "
        "the whole `spacy train` process; `test trees` the share of test sentences parsed as one tree.\n"
    )
    for dataset in DATASETS:
        parts.append(f"## {table['datasets'][dataset.key]['name']}\n")
        parts.append(dataset_markdown(dataset, table["datasets"][dataset.key]["rows"]))
    parts.append("## Orderings (test scores, difference in points)\n")
    parts.append(
        "The paper claims the first three; its own figures answer the fourth with no; it has no "
        "transition parser for the fifth. "
        "Where both rows' test arc counts are recorded, the difference comes with a paired bootstrap "
        f"over test sentences (10,000 resamples, the same sentences for both rows, seed {BOOTSTRAP_SEED}): the 95% "
        "interval of the difference and p, the share of resamples in which the first row does not "
        "score higher. An interval that spans 0 means the test set cannot tell the two rows apart "
        "(the verdict then says it is within the test set's noise); "
        "it says nothing of the spread over training seeds"
        + (" (the last section shows it where rows were trained under several). " if table["seed_spread"] else ". ")
        + "LAS only where the gold trees have labels.\n"
    )
    for metric in METRICS:
        names = [dataset.key for dataset in DATASETS if metric in dataset.metrics]
        parts.append(f"### {metric.upper()}\n")
        lines = ["| claim | comparison | paper | " + " | ".join(names) + " |", "|---|---|---|" + "---|" * len(names)]
        for entry in table["orderings"]:
            verdicts = [verdict_text(entry[name][metric]) for name in ("paper", *names)]
            lines.append(f"| {entry['claim']} | {entry['comparison']} | " + " | ".join(verdicts) + " |")
        parts.append("\n".join(lines) + "\n")
    if table["seed_spread"]:
        parts.append(seed_spread_markdown(table["seed_spread"]))
    return "\n".join(parts)


def seed_spread_markdown(spread: List[Dict]) -> str:
    lines = [
        "## Orderings over training seeds (test, difference in points)\n",
        "The comparisons whose rows were trained under more than one seed (`ablation-run --seed S`, one "
        "results folder a seed, everything else equal): the difference under each seed, their mean, and "
        "whether the first row is ahead under every seed; in brackets the two rows' scores.\n",
        "| claim | comparison | dataset | metric | by seed | mean | ahead in every seed |",
        "|---|---|---|---|---|---|---|",
    ]
    for entry in spread:
        by_seed = "; ".join(
            f"seed {run['seed']}: {run['difference']:+.2f} ({run['better']:.2f} vs {run['worse']:.2f})"
            for run in entry["runs"]
        )
        lines.append(
            f"| {entry['claim']} | {entry['comparison']} | {entry['dataset']} | {entry['metric'].upper()} | "
            f"{by_seed} | {entry['mean']:+.2f} | {'yes' if entry['holds_in_every_seed'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def write_ablation_table(
    results_dir: str, output: Optional[str], json_output: Optional[str], title: str = "", replicates: Sequence[str] = ()
) -> str:
    """Write the markdown and JSON; returns the markdown."""
    table = ablation_table(Path(results_dir), replicates)
    text = ablation_markdown(table, title)
    write_table_files(table, text, output, json_output, BOOTSTRAP_SEED)
    return text


def write_table_files(
    table: Dict, markdown: str, output: Optional[str], json_output: Optional[str], bootstrap_seed: int
) -> None:
    """A study table's markdown and its JSON (with provenance) to the paths given (None: not written)."""
    table["provenance"] = provenance(seed=bootstrap_seed)
    if output:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(markdown, encoding="utf8")
    if json_output:
        write_json(json_output, table)
