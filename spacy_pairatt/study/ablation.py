"""The paper's Table 1 ablation on one encoder: its rows as data, training them to one step budget,
and the table that sets the scores beside the paper's (docs/ablation.md).

Every pairatt row trains with the greedy decoder (each word's best head, as the paper does in
training), so spaCy's model-best is chosen on dev as the row is scored; `ft:emb+att (mst)` is the
`ft:emb+att` model decoded with MST instead, so the MST comparison is on the same weights.
"""

import json
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..provenance import provenance
from .bootstrap import paired_bootstrap

PAPER = "Meng et al. 2019, Table 1: BERT-base, full PTB (Stanford dependencies), UAS/LAS without punctuation"
DEFAULT_ENCODER = "all-MiniLM-L6-v2"
TRAINING_DECODER = "greedy"
BOOTSTRAP_SEED = 0
EMBEDDINGS_ONLY = ("--components.pairatt_parser.model.scorer.use_attention", "false")


@dataclass(frozen=True)
class Row:
    """One line of Table 1. Rows with the same `training` share one trained model."""

    key: str
    name: str
    description: str
    config: str
    training: str
    decoder: Optional[str]
    overrides: Tuple[str, ...] = ()
    adapted_encoder: bool = False
    paper_uas: Optional[float] = None
    paper_las: Optional[float] = None


ROWS = (
    Row("fea_emb", "fea:emb", "frozen encoder, hidden states only", "configs/parser_minilm_fea.cfg",
        "fea_emb", "greedy", EMBEDDINGS_ONLY, paper_uas=62.1, paper_las=55.5),
    Row("fea_emb_att", "fea:emb+att", "frozen encoder, hidden states and attention", "configs/parser_minilm_fea.cfg",
        "fea_emb_att", "greedy", paper_uas=77.2, paper_las=68.3),
    Row("fea_mlm_emb_att", "fea:mlm:emb+att",
        "frozen encoder after masked-LM training on the training set's text (the paper's fea:ptb:emb+att)",
        "configs/parser_minilm_fea.cfg", "fea_mlm_emb_att", "greedy", adapted_encoder=True,
        paper_uas=76.9, paper_las=67.4),
    Row("ft_emb", "ft:emb", "fine-tuned encoder, hidden states only", "configs/parser_minilm.cfg",
        "ft_emb", "greedy", EMBEDDINGS_ONLY, paper_uas=87.8, paper_las=86.0),
    Row("ft_emb_att", "ft:emb+att",
        "fine-tuned through hidden states and attention (AttentionTransformerModel.v1), greedy decoding",
        "configs/parser_minilm_ftatt.cfg", "ft_emb_att", "greedy", paper_uas=89.3, paper_las=87.8),
    Row("ft_emb_att_mst", "ft:emb+att (mst)", "the ft:emb+att model decoded with MST",
        "configs/parser_minilm_ftatt.cfg", "ft_emb_att", "mst", paper_uas=90.9, paper_las=88.9),
    Row("transition", "transition (reference)", "spaCy's transition parser on the same fine-tuned encoder",
        "configs/transition_minilm.cfg", "transition", None),
)  # fmt: skip
ROWS_BY_KEY = {row.key: row for row in ROWS}


@dataclass(frozen=True)
class Dataset:
    key: str
    name: str
    labelled: bool

    @property
    def metrics(self) -> Tuple[str, ...]:
        """The attachment scores its gold trees allow: LAS needs labels."""
        return METRICS if self.labelled else ("uas",)


METRICS = ("uas", "las")


DATASETS = (
    Dataset("ewt", "UD English-EWT 2.16", labelled=True),
    Dataset("ptb", "PTB sample (NLTK's 10% of WSJ; heads only, so UAS alone)", labelled=False),
)


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


def select_rows(keys: Optional[Sequence[str]]) -> List[Row]:
    """The rows named by key, in table order (all when `keys` is empty)."""
    if not keys:
        return list(ROWS)
    unknown = sorted(set(keys) - set(ROWS_BY_KEY))
    if unknown:
        raise ValueError(f"unknown ablation rows {unknown}; known: {list(ROWS_BY_KEY)}")
    return [row for row in ROWS if row.key in keys]


def budget_overrides(steps: int, seed: int, dev_limit: int) -> List[str]:
    """`spacy train` overrides giving every row the same steps and schedule shape as the configs
    (warm-up an eighth of the steps, four dev evaluations)."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    return [
        "--system.seed", str(seed),
        "--training.max_epochs", "0",
        "--training.max_steps", str(steps),
        "--training.eval_frequency", str(max(1, steps // 4)),
        "--training.optimizer.learn_rate.total_steps", str(steps),
        "--training.optimizer.learn_rate.warmup_steps", str(max(1, steps // 8)),
        "--corpora.dev.limit", str(dev_limit),
    ]  # fmt: skip


def train_command(
    row: Row, train: str, dev: str, output: str, steps: int, seed: int, dev_limit: int = 0,
    adapted_encoder: Optional[str] = None, gpu_id: int = -1,
) -> List[str]:  # fmt: skip
    """The `python -m spacy train` arguments of a row's training run."""
    command = ["python", "-m", "spacy", "train", row.config, "--output", output, "--gpu-id", str(gpu_id)]
    command += ["--paths.train", train, "--paths.dev", dev, *budget_overrides(steps, seed, dev_limit)]
    if row.decoder is not None:
        command += ["--components.pairatt_parser.decoder", TRAINING_DECODER]
    command += list(row.overrides)
    if row.adapted_encoder:
        if not adapted_encoder:
            raise ValueError(f"row {row.name} needs an adapted encoder (--adapted-encoder DIR from mlm-adapt)")
        command += ["--components.transformer.model.name", adapted_encoder]
    return command


def run_training(command: List[str], log: Optional[Path] = None) -> Tuple[float, float]:
    """Run a `python -m spacy train` command (from `train_command`) with this interpreter; its output
    goes to `log` when given. Returns the process's wall seconds and its start as `time.time()`."""
    start, started = time.perf_counter(), time.time()
    if log is None:
        subprocess.run([sys.executable, *command[1:]], check=True)
    else:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("w", encoding="utf8") as output:
            subprocess.run([sys.executable, *command[1:]], check=True, stdout=output, stderr=subprocess.STDOUT)
    return round(time.perf_counter() - start, 1), started


def config_learn_rate(config_path: str) -> Optional[float]:
    """The initial learning rate of a training config: a constant rate, or its schedule's `initial_rate`
    (None for a schedule without one)."""
    from spacy.util import load_config

    learn_rate = load_config(config_path, interpolate=False)["training"]["optimizer"]["learn_rate"]
    return learn_rate.get("initial_rate") if isinstance(learn_rate, dict) else learn_rate


def run_ablation(
    dataset: str, train: str, dev: str, test: str, training_dir: str, results_dir: str, steps: int,
    seed: int = 0, dev_limit: int = 0, adapted_encoder: Optional[str] = None, gpu_id: int = -1,
    rows: Optional[Sequence[str]] = None, train_models: bool = True,
) -> None:  # fmt: skip
    """Train each selected row's model (timed, one `spacy train` process each), then score its
    model-best on dev and on test once, into `results_dir`/{training}_train.json and {key}_{split}.json,
    with test's per-document arc counts in {key}_test_arcs.json. `train_models=False` re-scores
    models trained before (after a change to the scoring, say) without training again."""
    from ..evaluation.parser_eval import evaluate_pipeline, write_json

    selected = select_rows(rows)
    if adapted_encoder and not Path(adapted_encoder).is_dir():
        raise ValueError(f"adapted encoder {adapted_encoder} is not a directory (run mlm-adapt first)")
    for path in (train, dev, test):
        if not Path(path).exists():
            raise ValueError(f"{path} does not exist (run the convert / ptb-convert command first)")
    results = Path(results_dir)
    results.mkdir(parents=True, exist_ok=True)
    trainings: Dict[str, Row] = {}
    for row in selected:
        trainings.setdefault(row.training, row)
    to_train = trainings.items() if train_models else ()
    for training, row in to_train:
        command = train_command(
            row, train, dev, str(Path(training_dir) / training), steps, seed, dev_limit, adapted_encoder, gpu_id
        )
        seconds, started = run_training(command)
        record = {
            "dataset": dataset,
            "config": row.config,
            "command": shlex.join(command),
            "encoder": adapted_encoder if row.adapted_encoder else DEFAULT_ENCODER,
            "steps": steps,
            "seed": seed,
            "learn_rate": config_learn_rate(row.config),
            "dev_limit": dev_limit,
            "seconds": seconds,
            "model": str(Path(training_dir) / training / "model-best"),
            "provenance": provenance(seed=seed, started=started),
        }
        (results / f"{training}_train.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf8")
    for row in selected:
        model = Path(training_dir) / row.training / "model-best"
        if not model.is_dir():
            raise ValueError(f"{model} does not exist: train row {row.key} first (without --score-only)")
        for split, data in (("dev", dev), ("test", test)):
            result = evaluate_pipeline(str(model), data, decoder=row.decoder, per_document=split == "test")
            if split == "test":
                arcs_path = results / f"{row.key}_test_arcs.json"
                arcs_path.write_text(json.dumps(result.pop("arc_counts"), separators=(",", ":")) + "\n", "utf8")
            write_json(result, str(results / f"{row.key}_{split}.json"))


def read_json(path: Path) -> Optional[Dict]:
    return json.loads(path.read_text(encoding="utf8")) if path.exists() else None


def split_scores(result: Optional[Dict], labelled: bool) -> Optional[Dict]:
    """Percentages of an evaluate result: UAS (and LAS on labelled data) without punctuation, and
    the share of sentences parsed as one tree. Not rounded: differences and verdicts come from the
    exact scores, and the markdown rounds once, as it prints."""
    if result is None:
        return None
    scores = result["scores"]

    def pct(name):
        return None if scores.get(name) is None else 100 * scores[name]

    return {"uas": pct("dep_uas"), "las": pct("dep_las") if labelled else None, "trees": pct("dep_single_tree")}


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
                "dev": split_scores(read_json(folder / f"{row.key}_dev.json"), dataset.labelled),
                "test": split_scores(read_json(folder / f"{row.key}_test.json"), dataset.labelled),
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


def cell(value, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


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
    table["provenance"] = provenance(seed=BOOTSTRAP_SEED)
    for path, content in ((output, text), (json_output, json.dumps(table, indent=2) + "\n")):
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(content, encoding="utf8")
    return text
