"""The paper's Table 1 ablation on one encoder: its rows as data and training them to one step budget
(docs/ablation.md); the table that sets the scores beside the paper's is ablation_table.py.

Every pairatt row trains with the greedy decoder (each word's best head, as the paper does in
training), so spaCy's model-best is chosen on dev as the row is scored; `ft:emb+att (mst)` is the
`ft:emb+att` model decoded with MST instead, so the MST comparison is on the same weights.
"""

import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from spacy_pairatt.reporting.json_files import write_json
from spacy_pairatt.reporting.provenance import code_version, provenance

DEFAULT_ENCODER = "all-MiniLM-L6-v2"
TRAINING_DECODER = "greedy"
EMBEDDINGS_ONLY = ("--components.pairatt_parser.model.pair_scorer.use_attention", "false")


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


def run_training(command: List[str], log: Optional[Path] = None) -> Tuple[float, float, Dict]:
    """Run a `python -m spacy train` command (from `train_command`) with this interpreter; its output
    goes to `log` when given. Returns the process's wall seconds, its start as `time.time()` and the
    code it started from (`code_version()`, for `provenance(code=...)`)."""
    start, started, code = time.perf_counter(), time.time(), code_version()
    if log is None:
        subprocess.run([sys.executable, *command[1:]], check=True)
    else:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("w", encoding="utf8") as output:
            subprocess.run([sys.executable, *command[1:]], check=True, stdout=output, stderr=subprocess.STDOUT)
    return round(time.perf_counter() - start, 1), started, code


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
    from spacy_pairatt.evaluation.parser_eval import evaluate_pipeline
    from spacy_pairatt.reporting.tables import report_json

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
        seconds, started, code = run_training(command)
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
            "provenance": provenance(seed=seed, started=started, code=code),
        }
        write_json(results / f"{training}_train.json", record)
    for row in selected:
        model = Path(training_dir) / row.training / "model-best"
        if not model.is_dir():
            raise ValueError(f"{model} does not exist: train row {row.key} first (without --score-only)")
        for split, data in (("dev", dev), ("test", test)):
            result = evaluate_pipeline(str(model), data, decoder=row.decoder, per_document=split == "test")
            if split == "test":
                write_json(results / f"{row.key}_test_arcs.json", result.pop("arc_counts"), compact=True)
            report_json(result, str(results / f"{row.key}_{split}.json"))


def percent_scores(result: Optional[Dict], labelled: bool) -> Optional[Dict]:
    """Percentages of an evaluate result: UAS (and LAS on labelled data) without punctuation, and
    the share of sentences parsed as one tree. Not rounded: differences and verdicts come from the
    exact scores, and the markdown rounds once, as it prints."""
    if result is None:
        return None
    scores = result["scores"]

    def pct(name):
        return None if scores.get(name) is None else 100 * scores[name]

    return {"uas": pct("dep_uas"), "las": pct("dep_las") if labelled else None, "trees": pct("dep_single_tree")}
