"""The attention curve: where attention pays, by training size, domain and task
(docs/attention_curve.md).

A run is one model: a task's row (hidden states only, or with attention), a training size (a seeded
random subset of the training set, or all of it) and a seed, which is both the training seed and
the seed that drew the subset, so the two rows at one size and seed see the same sentences. Each
run trains with `ablation.train_command` (one `spacy train` process) to the step budget of
`Budget`, keeps spaCy's model-best on dev, and is scored once on each test set with the project's
evaluations, into RESULTS/runs/{run_id}.json (summary and provenance) and
RESULTS/evaluations/{run_id}_{domain}.json (the full evaluation; parser runs also
{run_id}_{domain}_arcs.json, the per-sentence arc counts the bootstrap needs).

Their table: attention_curve_table.py.
"""

import hashlib
import json
import math
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from spacy_pairatt.packaging.split_encoders import file_sha256
from spacy_pairatt.reporting.json_files import read_json, write_json
from spacy_pairatt.reporting.provenance import code_fingerprint, provenance

from .ablation import DATASETS, EMBEDDINGS_ONLY, Row, config_learn_rate, percent_scores, run_training
from .ablation import train_command as ablation_train_command

# The paths whose contents make an earlier run's results stale when they change (`--reuse same-code`).
TRAINING_CODE = ("spacy_pairatt", "projects/paper/pairatt_paper", "configs", "setup.py")
REUSE_POLICIES = ("same-code", "existing", "never")
# Measured on 2 idle CPU cores: ~20 min per 800-step parser training including its 4 dev evaluations
# (results/train_pairatt_cost.json), ~11 min per 675-step SemEval training (the curve's runs table);
# scoring a parser on EWT and PTB test and loading it, about 2 minutes.
CPU_SECONDS_PER_STEP = {"parser": 20 * 60 / 800, "relations": 11 * 60 / 675}
CPU_SECONDS_PER_RUN = {"parser": 120, "relations": 60}
REL_NO_ATTENTION = ("--components.pairatt_rel.model.pair_scorer.use_attention", "false")


@dataclass(frozen=True)
class Budget:
    """Equal budgets: both rows at one size train the same number of steps, under the config's
    schedule shape (`ablation.budget_overrides`), and keep model-best on dev.

    steps = ceil(steps_per_sentence * training sentences), at least `min_steps`, at most
    `max_steps` (the full-data budget). The default gives every size the full-data budget, the
    config's own: the parser 800 steps, relations 675 (the SemEval recipe's 3 epochs of 32
    sentences at 7,200). A budget that shrank with the data (200 parser steps at 100 to 1,600
    sentences, the rule of the first curve) left the small sizes short of steps, not only of data:
    their LAS measured steps as much as sentences. model-best on dev guards the small sets against
    the epochs that many steps make."""

    steps_per_sentence: float
    min_steps: int
    max_steps: int

    def steps(self, n_train: int) -> int:
        if n_train < 1:
            raise ValueError(f"a training set needs at least one sentence, got {n_train}")
        if not 1 <= self.min_steps <= self.max_steps:
            raise ValueError(f"need 1 <= min_steps <= max_steps, got {self.min_steps} and {self.max_steps}")
        return min(self.max_steps, max(self.min_steps, math.ceil(self.steps_per_sentence * n_train)))

    def rule(self) -> str:
        if self.min_steps == self.max_steps:
            return f"{self.max_steps} steps at every size; the config's schedule; model-best on dev"
        return (
            f"steps = ceil({self.steps_per_sentence:g} x training sentences), at least {self.min_steps}, "
            f"at most {self.max_steps}; the config's schedule shape scaled to the steps; model-best on dev"
        )


@dataclass(frozen=True)
class Task:
    key: str
    rows: Tuple[Row, ...]
    budget: Budget
    # meta.json performance keys of spaCy's dev scores of model-best, with the names we give them
    dev_scores: Tuple[Tuple[str, str], ...]

    def row(self, key: str) -> Row:
        for row in self.rows:
            if row.key == key:
                return row
        raise ValueError(f"unknown {self.key} row {key!r}; known: {[row.key for row in self.rows]}")


# Row.decoder None: train_command adds no decoder override, so the parser trains and is scored with
# its config's decoder (MST in both configs).
PARSER_ROWS = (
    Row("emb", "emb", "hidden states only (use_attention false)", "configs/parser_minilm.cfg", "emb", None,
        EMBEDDINGS_ONLY),
    Row("att", "emb+att", "hidden states and attention, the default parser", "configs/parser_minilm.cfg", "att",
        None),
    Row("ftatt", "ft:emb+att", "hidden states and attention, fine-tuned through attention too",
        "configs/parser_minilm_ftatt.cfg", "ftatt", None),
)  # fmt: skip
RELATION_ROWS = (
    Row("emb", "emb", "hidden states only (use_attention false)", "configs/rel_semeval_minilm.cfg", "emb", None,
        REL_NO_ATTENTION),
    Row("att", "emb+att", "hidden states and attention", "configs/rel_semeval_minilm.cfg", "att", None),
)  # fmt: skip
TASKS = {
    "parser": Task("parser", PARSER_ROWS, Budget(1 / 8, 800, 800), (("dep_uas", "uas"), ("dep_las", "las"))),
    "relations": Task("relations", RELATION_ROWS, Budget(3 / 32, 675, 675), (("rel_micro_f", "micro_f"),)),
}
# (better, worse): the comparisons the table draws wherever both rows ran at a size.
COMPARISONS = (("att", "emb"), ("ftatt", "emb"), ("ftatt", "att"))
DOMAINS = {dataset.key: dataset for dataset in DATASETS}


@dataclass(frozen=True)
class Run:
    task: str
    dataset: str
    row: str
    size: Optional[int]  # None: the whole training set
    seed: int

    @property
    def run_id(self) -> str:
        return f"{self.dataset}_{size_label(self.size)}_s{self.seed}_{self.row}"


def size_label(size: Optional[int]) -> str:
    return "full" if size is None else f"n{size}"


def plan_runs(
    task: str, dataset: str, rows: Sequence[str], sizes: Sequence[Optional[int]], seeds: Sequence[int]
) -> List[Run]:
    """Every (size, seed, row) in that order: both rows of a size and seed run one after the other."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known: {sorted(TASKS)}")
    for key in rows:
        TASKS[task].row(key)
    if not rows or not sizes or not seeds:
        raise ValueError("give at least one row, one size and one seed")
    return [Run(task, dataset, row, size, seed) for size in sizes for seed in seeds for row in rows]


# -- subsets ------------------------------------------------------------------------------------


def subset_indices(n_docs: int, size: int, seed: int) -> np.ndarray:
    """The sorted indices of `size` of `n_docs` documents, drawn without replacement under `seed`:
    the first `size` of one seeded permutation, so one seed's subsets are nested (100 within 400...)."""
    if not 1 <= size <= n_docs:
        raise ValueError(f"a subset of {size} documents cannot be drawn from {n_docs}")
    return np.sort(np.random.default_rng(seed).permutation(n_docs)[:size])


def write_subsets(source: str, out_dir: str, sizes: Sequence[int], seeds: Sequence[int]) -> Dict:
    """OUT_DIR/n{size}_s{seed}.spacy for every size and seed (documents and their user_data, in the
    source's order) and OUT_DIR/subsets.json recording the source, its SHA-256, every subset's seed
    and indices. Two sources of the same length (SemEval with and without markers) get the same
    indices for the same size and seed."""
    import spacy
    from spacy.tokens import DocBin

    if not Path(source).exists():
        raise ValueError(f"{source} does not exist (run the convert command first)")
    docs = list(DocBin(store_user_data=True).from_disk(source).get_docs(spacy.blank("en").vocab))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    subsets = []
    for size in sizes:
        for seed in seeds:
            indices = subset_indices(len(docs), size, seed)
            path = out / f"n{size}_s{seed}.spacy"
            DocBin(store_user_data=True, docs=[docs[i] for i in indices]).to_disk(path)
            subsets.append({"size": size, "seed": seed, "path": str(path), "indices": indices.tolist()})
    manifest = {
        "source": str(source),
        "source_sha256": file_sha256(Path(source)),
        "n_source_docs": len(docs),
        "rule": "the first SIZE of numpy.random.default_rng(SEED).permutation(N), sorted",
        "subsets": subsets,
        "provenance": provenance(),
    }
    write_json(out / "subsets.json", manifest)
    return manifest


def find_subset(subsets_dir: str, size: int, seed: int) -> Dict:
    """The subsets.json entry of one size and seed (without its indices, with their SHA-256 and the
    source's)."""
    manifest = read_json(Path(subsets_dir) / "subsets.json")
    if manifest is None:
        raise ValueError(f"{subsets_dir}/subsets.json does not exist (run curve-subsets first)")
    for subset in manifest["subsets"]:
        if subset["size"] == size and subset["seed"] == seed:
            indices = json.dumps(subset["indices"]).encode("utf8")
            return {
                "path": subset["path"], "size": size, "seed": seed, "source": manifest["source"],
                "source_sha256": manifest["source_sha256"], "indices_sha256": hashlib.sha256(indices).hexdigest(),
            }  # fmt: skip
    raise ValueError(f"{subsets_dir} has no subset of {size} under seed {seed} (curve-subsets --sizes --seeds)")


def count_docs(path: str) -> int:
    from spacy.tokens import DocBin

    return len(DocBin().from_disk(path))


# -- runs ---------------------------------------------------------------------------------------


def reusable(record: Optional[Dict], reuse: str, fingerprint: Optional[str]) -> bool:
    """Whether a results file written before stands: `existing` takes any, `never` none, and
    `same-code` one written by the same TRAINING_CODE as now (`fingerprint`: `code_fingerprint`)."""
    if reuse not in REUSE_POLICIES:
        raise ValueError(f"reuse must be one of {REUSE_POLICIES}, got {reuse!r}")
    if record is None or reuse == "never":
        return False
    return reuse == "existing" or (fingerprint is not None and record.get("code_sha256") == fingerprint)


@dataclass(frozen=True)
class Setup:
    """Where a plan's runs read and write, and how they train."""

    train: str
    dev: str
    tests: Dict[str, str]  # domain -> test .spacy
    training_dir: str
    results_dir: str
    subsets: Optional[str] = None  # curve-subsets folder, needed for sizes other than full
    budget: Optional[Budget] = None  # default: the task's
    gpu_id: int = -1
    dev_limit: int = 0
    encoder: Optional[str] = None  # replaces the configs' encoder (the tests' tiny BERT)
    reuse: str = "same-code"
    jobs: int = 1  # trainings at once (a GPU has room for several of these small models; 2 CPU cores do not)

    def run_record(self, run: Run, kind: str = "") -> Path:
        """RESULTS/runs/{run_id}{kind}.json: the run's results (kind "") or its training record (".train")."""
        return Path(self.results_dir) / "runs" / f"{run.run_id}{kind}.json"


def run_data(run: Run, setup: Setup) -> Tuple[str, int, Optional[Dict]]:
    """The run's training file, its number of sentences (documents), and its subset's record."""
    if run.size is None:
        return setup.train, count_docs(setup.train), None
    if not setup.subsets:
        raise ValueError(f"run {run.run_id} needs --subsets (the curve-subsets folder)")
    subset = find_subset(setup.subsets, run.size, run.seed)
    return subset["path"], run.size, subset


def run_command(run: Run, setup: Setup, train: str, steps: int) -> List[str]:
    row = TASKS[run.task].row(run.row)
    output = str(Path(setup.training_dir) / run.run_id)
    command = ablation_train_command(
        row, train, setup.dev, output, steps, run.seed, setup.dev_limit, gpu_id=setup.gpu_id
    )
    if setup.encoder:
        command += ["--components.transformer.model.name", setup.encoder]
    return command


def train_run(run: Run, setup: Setup) -> Dict:
    """Train one run (unless an earlier training of it may be reused) and return its training record."""
    path = setup.run_record(run, ".train")
    record, fingerprint = read_json(path), code_fingerprint(TRAINING_CODE)
    if reusable(record, setup.reuse, fingerprint):
        print(f"{run.run_id}: training reused ({path})")
        return record
    budget = setup.budget or TASKS[run.task].budget
    train, n_train, subset = run_data(run, setup)
    steps = budget.steps(n_train)
    command = run_command(run, setup, train, steps)
    log = Path(setup.training_dir) / f"{run.run_id}.log"
    print(f"{run.run_id}: training {steps} steps on {n_train} sentences (log: {log})", flush=True)
    seconds, started, code = run_training(command, log)
    row = TASKS[run.task].row(run.row)
    record = {
        **asdict(run), "run_id": run.run_id, "row_name": row.name, "description": row.description,
        "config": row.config, "encoder": setup.encoder or "all-MiniLM-L6-v2", "train": train, "dev": setup.dev,
        "n_train": n_train, "subset": subset, "steps": steps, "budget": {**asdict(budget), "rule": budget.rule()},
        "learn_rate": config_learn_rate(row.config), "dev_limit": setup.dev_limit, "command": " ".join(command),
        "train_seconds": seconds, "log": str(log), "model": str(Path(setup.training_dir) / run.run_id / "model-best"),
        "code_sha256": fingerprint, "trainings_at_once": setup.jobs,
        "provenance": provenance(seed=run.seed, started=started, code=code),
    }  # fmt: skip
    write_json(path, record)
    return record


def dev_scores(model: str, task: Task) -> Dict[str, Optional[float]]:
    """spaCy's dev scores of model-best (meta.json), in percent: what chose it."""
    meta = read_json(Path(model) / "meta.json") or {}
    performance = meta.get("performance", {})
    return {name: None if performance.get(key) is None else 100 * performance[key] for key, name in task.dev_scores}


def score_run(run: Run, training: Dict, setup: Setup) -> Dict:
    """Score one trained run on each test set once; returns {domain: scores in percent}."""
    from spacy_pairatt.evaluation.parser_eval import evaluate_pipeline
    from spacy_pairatt.evaluation.relation_eval import evaluate_semeval
    from spacy_pairatt.reporting.tables import report_json

    evaluations = Path(setup.results_dir) / "evaluations"
    scores = {}
    for domain, data in setup.tests.items():
        output = evaluations / f"{run.run_id}_{domain}.json"
        if run.task == "relations":
            result = evaluate_semeval(training["model"], data, labels=True)
            scores[domain] = {name[len("rel_semeval_") :]: 100 * value for name, value in result["scores"].items()}
            scores[domain]["labels"] = write_labels(setup, run.run_id, domain, result.pop("labels"))
        else:
            result = evaluate_pipeline(training["model"], data, per_document=True)
            arcs = evaluations / f"{run.run_id}_{domain}_arcs.json"
            write_json(arcs, result.pop("arc_counts"), compact=True)
            labelled = DOMAINS[domain].labelled if domain in DOMAINS else True
            scores[domain] = {**percent_scores(result, labelled), "arcs": str(arcs.relative_to(setup.results_dir))}
        report_json(result, str(output))
        scores[domain]["evaluation"] = str(output.relative_to(setup.results_dir))
    return scores


def write_labels(setup: Setup, run_id: str, domain: str, labels: Dict[str, List[str]]) -> str:
    """Each test sentence's gold and predicted SemEval label, for the paired bootstrap of macro-F1,
    into evaluations/{run_id}_{domain}_labels.json; returns that path relative to the results."""
    path = Path(setup.results_dir) / "evaluations" / f"{run_id}_{domain}_labels.json"
    write_json(path, labels, compact=True)
    return str(path.relative_to(setup.results_dir))


def add_relation_labels(record: Dict, setup: Setup) -> bool:
    """Write the per-sentence labels of a relation run scored before they were kept: its model-best
    predicts each test set again, and must give the macro-F1 its record holds (else ValueError).
    Returns whether the record changed."""
    from spacy_pairatt.corpora.relation_metrics import semeval_official_scores
    from spacy_pairatt.evaluation.relation_eval import evaluate_semeval

    changed = False
    for domain, scores in record["test"].items():
        if "labels" in scores or domain not in setup.tests:
            continue
        labels = evaluate_semeval(record["model"], setup.tests[domain], labels=True)["labels"]
        again = 100 * semeval_official_scores(labels["gold"], labels["predicted"])["macro_f1"]
        if abs(again - scores["macro_f1"]) > 1e-6:
            raise ValueError(
                f"{record['run_id']}: {record['model']} now gives macro-F1 {again:.4f} on {domain}, its record "
                f"{scores['macro_f1']:.4f}; the model changed since it was scored"
            )
        scores["labels"] = write_labels(setup, record["run_id"], domain, labels)
        changed = True
    return changed


def run_curve(runs: Sequence[Run], setup: Setup) -> List[Dict]:
    """Train and score each run not already done (see `reusable`), into RESULTS/runs/{run_id}.json.

    With `setup.jobs` > 1, up to that many `spacy train` processes run at once and each run is
    scored (in this process) as soon as its training ends; a new training starts once a run is
    scored, so with one job training and scoring alternate, as the CPU timings assume. The records
    come back in the order of `runs`.
    """
    import spacy

    for path in (setup.train, setup.dev, *setup.tests.values()):
        if not Path(path).exists():
            raise ValueError(f"{path} does not exist (run the convert / ptb-convert / semeval-convert command first)")
    if setup.jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {setup.jobs}")
    if setup.gpu_id >= 0:
        spacy.require_gpu(setup.gpu_id)
    fingerprint = code_fingerprint(TRAINING_CODE)
    records: Dict[str, Dict] = {}
    queued = []
    for run in runs:
        path = setup.run_record(run)
        record = read_json(path)
        if not reusable(record, setup.reuse, fingerprint):
            queued.append(run)
            continue
        print(f"{run.run_id}: results reused ({path})")
        if run.task == "relations" and add_relation_labels(record, setup):
            write_json(path, record)
            print(f"{run.run_id}: per-sentence labels added ({path})")
        records[run.run_id] = record
    with ThreadPoolExecutor(max_workers=setup.jobs) as pool:
        training: Dict = {}
        while queued or training:
            while queued and len(training) < setup.jobs:
                run = queued.pop(0)
                training[pool.submit(timed_training, run, setup)] = run
            finished, _ = wait(training, return_when=FIRST_COMPLETED)
            for future in finished:
                # A failed training raises here: nothing more is submitted, and the trainings under
                # way finish before the error leaves the pool.
                run = training.pop(future)
                records[run.run_id] = score_and_write(run, *future.result(), setup, fingerprint)
    return [records[run.run_id] for run in runs]


def timed_training(run: Run, setup: Setup) -> Tuple[Dict, float]:
    """`train_run` and when it started (a queued run's wait for a free job is not its time)."""
    started = time.time()
    return train_run(run, setup), started


def score_and_write(run: Run, training: Dict, started: float, setup: Setup, fingerprint: Optional[str]) -> Dict:
    """A trained run's dev and test scores with its training record, into RESULTS/runs/{run_id}.json."""
    record = {
        **training,
        "dev_scores": dev_scores(training["model"], TASKS[run.task]),
        "test": score_run(run, training, setup),
        "train_provenance": training["provenance"],
        "train_code_sha256": training.get("code_sha256"),
        "code_sha256": fingerprint,
        "provenance": provenance(seed=run.seed, started=started),
    }
    path = setup.run_record(run)
    write_json(path, record)
    print(f"{run.run_id}: done ({path})", flush=True)
    return record


def estimate_cpu_seconds(runs: Iterable[Run], n_train: Dict[Optional[int], int], budgets: Dict[str, Budget]) -> float:
    """Rough CPU wall time of the runs on 2 cores, from the measured CPU_SECONDS_PER_STEP / _PER_RUN.
    n_train: the sentences of each size (None: the full set)."""
    total = 0.0
    for run in runs:
        steps = budgets[run.task].steps(n_train[run.size])
        total += steps * CPU_SECONDS_PER_STEP[run.task] + CPU_SECONDS_PER_RUN[run.task]
    return total
