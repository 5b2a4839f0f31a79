"""Resumable training: spaCy's own training loop, with checkpoints it resumes from.

`train_resumable` builds the pipeline with spaCy's `init_nlp` and trains it with spaCy's
`train_while_improving`, as `spacy train` does, writing model-best and model-last as it does. Every
N steps, when training ends and when SIGTERM, SIGINT or SIGHUP arrives (after the step in progress)
it also writes a checkpoint (`checkpoints.py`). Run again into the same output, it builds the
pipeline from the config again and replays the first steps without training on them: the batch
stream, the dropout and learning-rate schedules and the evaluation steps advance as they did, and
the recorded dev scores stand in for the evaluations (so "best so far" and patience are as they
were). At the checkpoint's step it puts back the weights, the optimizer's state, the losses and the
random states, and the steps after it are those of a run never stopped.

Each call is a piece of the run: its steps, wall time, CPU time and peak RSS go into every checkpoint
(`Progress.pieces`) and, as the call ends, into OUTPUT/training_pieces.json, which `scripts/run_cost.py
--pieces` turns into the whole run's cost. A piece's work after its last checkpoint, lost to a kill, is
not counted: what the run needed, not what its interruptions cost.

The checkpoints live in OUTPUT/checkpoints, or in a folder of their own (`checkpoints_path`, the
command's --checkpoints), such as one under the user's cache that outlives a checkout: a fresh
checkout's run resumes from them. There the run also keeps its model-best, which a resume into an
output that lacks it copies back.

A resume reads the newest checkpoint whose files prove themselves (`checkpoints.prove`) and decode;
each newer one is named in a warning and set aside. An output that holds a training (model-best,
model-last, checkpoints) but no checkpoint to resume from is refused: only `restart=True` (the
command's --restart) starts it over, deleting them.

The batch stream advances under its own Python random state, seeded with the training seed (spaCy
shuffles with the global one): it is a function of the seed alone, which is what makes it replayable.
"""

import os
import random
import resource
import shutil
import signal
import sys
import time
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Dict, Iterator, List, Optional

import srsly
from spacy import util
from spacy.schemas import ConfigSchemaTraining
from spacy.training.initialize import init_nlp
from spacy.training.loop import (
    DIR_MODEL_BEST,
    DIR_MODEL_LAST,
    clean_output_dir,
    create_before_to_disk_callback,
    create_evaluation_callback,
    create_train_batches,
    train_while_improving,
    update_meta,
)
from thinc.api import Config, fix_random_seed, set_gpu_allocator
from wasabi import Printer

from ..runs.scratch import naming_path
from ..runs.signals import STOP_SIGNALS
from .checkpoints import (
    CHECKPOINTS_DIR,
    KEPT_BEST_DIR,
    CheckpointDamaged,
    ResumeError,
    checkpoint_name,
    checkpoint_step,
    checkpoint_steps,
    exclusive_checkpoints,
    keep_best,
    newest_readable,
    prove,
    remove_all_checkpoints,
    set_aside,
    set_aside_checkpoints,
    write_checkpoint,
)
from .optimizer_state import optimizer_state, restore_optimizer
from .random_state import random_states, reseed_gpu_generator, restore_random_states

# Settings a resumed run may change: they decide when training stops, not what a step does.
CHANGEABLE_SETTINGS = ("training.max_steps", "training.patience")
PIPELINE_DIR = "pipeline"
OPTIMIZER_FILE = "optimizer.msgpack"
RANDOM_FILE = "random.msgpack"
PROGRESS_FILE = "progress.json"
PIECES_FILE = "training_pieces.json"  # in OUTPUT, for run_cost --pieces
UNPROVEN = (
    "written before checkpoints recorded SHA-256s: only its files' sizes are checked, so damage that keeps "
    "a file's size would go unseen; resuming from it"
)


@dataclass
class TrainingOutcome:
    """How a call ended: `steps` completed in all (this run and those it resumed), the signal that
    stopped it (None: it finished), the checkpoint it resumed from and the newest one there is."""

    model_last: Path
    steps: int
    stopped_by: Optional[str] = None
    resumed_from: Optional[Path] = None
    checkpoint: Optional[Path] = None


@dataclass
class Progress:
    """What progress.json records beside the weights: `steps` completed, the dev scores of every
    evaluation so far, the losses gathered since the last one, time, words, the config, and the calls
    (`pieces`) that trained them: each one's from_step, to_step, wall_seconds, cpu_seconds, peak_rss_mb.
    A checkpoint written before pieces were recorded has none: the list then starts at its step."""

    steps: int = 0
    epoch: int = 0
    history: List[Dict[str, Any]] = field(default_factory=list)
    losses: Dict[str, float] = field(default_factory=dict)
    seconds: int = 0
    words: int = 0
    config: str = ""
    pieces: List[Dict[str, Any]] = field(default_factory=list)


def peak_rss_mb() -> float:
    """This process's largest resident set so far, in MB (Linux's ru_maxrss is in kB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class SavedState:
    """A checkpoint read back: its folder, its progress and config, the optimizer's and the random
    states; `proven`: its files passed their SHA-256s (False: a checkpoint with sizes only)."""

    path: Path
    progress: Progress
    config: Config
    optimizer: dict
    random: dict
    proven: bool


def train_resumable(
    config_path: Path,
    output_path: Path,
    *,
    checkpoint_every: int,
    keep: int = 2,
    use_gpu: int = -1,
    overrides: Optional[Dict[str, Any]] = None,
    restart: bool = False,
    checkpoints_path: Optional[Path] = None,
    stdout: Optional[IO] = None,
    stderr: Optional[IO] = None,
) -> TrainingOutcome:
    """Train `config_path` into `output_path` as `spacy train` does, resuming from the newest checkpoint
    that proves itself, in `checkpoints_path` (default: OUTPUT/checkpoints; `~` is the user's home);
    `restart`: start over, deleting what the output and the checkpoints hold of a training.
    stdout, stderr: default sys.stdout and sys.stderr as they are at the call (a redirect is followed).
    Call `spacy.require_gpu` first for a GPU, as for spaCy's `train`."""
    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    if checkpoint_every < 1:
        raise ResumeError(f"--checkpoint-every must be at least 1 step, not {checkpoint_every}")
    if keep < 1:
        raise ResumeError(f"--keep must be at least 1 checkpoint, not {keep}")
    output_path = Path(output_path)
    root_path = Path(checkpoints_path).expanduser() if checkpoints_path else output_path / CHECKPOINTS_DIR
    kept_best = None if root_path == output_path / CHECKPOINTS_DIR else root_path / KEPT_BEST_DIR
    config = util.load_config(config_path, overrides=overrides or {}, interpolate=False)
    with exclusive_checkpoints(root_path) as root:
        saved = None if restart else resumable_state(output_path, root, config, stderr)
        progress = saved.progress if saved else Progress()
        progress.config = config.to_str()
        nlp = init_nlp(config, use_gpu=use_gpu)
        if restart:  # once the config has built: a mistake in it deletes nothing (models: `train`)
            remove_all_checkpoints(root)
        run = ResumableRun(nlp, output_path, root, saved, progress, checkpoint_every, keep, use_gpu, kept_best)
        return run.train(stdout, stderr)


def resumable_state(output_path: Path, root: Path, config: Config, stderr: IO) -> Optional[SavedState]:
    """The newest checkpoint that reads back whole, trained with `config`'s settings; each newer one,
    damaged, is named in a warning and set aside. None for an output that holds no training; one that
    holds a training but no such checkpoint is a ResumeError that says how to start over."""
    saved, damaged = newest_readable(root, read_checkpoint)
    start_over = ways_to_start_over(checkpoints_elsewhere=root != output_path / CHECKPOINTS_DIR)
    if saved is None:
        trained = trained_paths(output_path, root)
        if trained:
            reasons = "".join(f"; {path.name}: {reason}" for path, reason in damaged)
            raise ResumeError(
                f"{output_path} holds a training ({', '.join(trained)}) but no checkpoint to resume from"
                f"{reasons}: {start_over}"
            )
        return None
    check_same_settings(saved.config, config, saved.path, start_over)
    for path, reason in damaged:  # one line each, unwrapped (wasabi wraps at 80 columns, paths too)
        kept = set_aside(path).name
        stderr.write(f"⚠ {path}: damaged, not resumed from ({reason}); kept as {kept} until the run passes it\n")
    if not saved.proven:
        stderr.write(f"⚠ {saved.path}: {UNPROVEN}\n")
    return saved


def trained_paths(output_path: Path, root: Path) -> List[str]:
    """What `output_path` and the checkpoints folder `root` hold of a training: model-best, model-last,
    checkpoints (damaged ones too) and the model-best kept beside them."""
    models = [name for name in (DIR_MODEL_BEST, DIR_MODEL_LAST) if (output_path / name).exists()]
    checkpoints = [root / checkpoint_name(step) for step in checkpoint_steps(root)] + set_aside_checkpoints(root)
    inside = root == output_path / CHECKPOINTS_DIR
    kept = [] if inside or not (root / KEPT_BEST_DIR).exists() else [root / KEPT_BEST_DIR]
    return models + [f"{CHECKPOINTS_DIR}/{path.name}" if inside else str(path) for path in checkpoints + kept]


def read_checkpoint(checkpoint: Path) -> SavedState:
    """A checkpoint's files proven (`prove`) and decoded; CheckpointDamaged for any that fails."""
    proven = prove(checkpoint)
    progress_file = checkpoint / PROGRESS_FILE
    progress = read_part(progress_file, lambda path: Progress(**srsly.read_json(path)))
    if progress.steps != checkpoint_step(checkpoint):
        raise CheckpointDamaged(f"{PROGRESS_FILE} records {progress.steps} steps, not {checkpoint_step(checkpoint)}")
    config = read_part(progress_file, lambda _: Config().from_str(progress.config, interpolate=False))
    optimizer, randoms = (read_part(checkpoint / name, srsly.read_msgpack) for name in (OPTIMIZER_FILE, RANDOM_FILE))
    return SavedState(checkpoint, progress, config, optimizer, randoms, proven)


def read_part(path: Path, read: Callable[[Path], Any]) -> Any:
    """`read(path)`; any error reading or decoding the file (its bytes may be damaged) is CheckpointDamaged."""
    try:
        return read(path)
    except Exception as error:  # noqa: BLE001 - a decoder's errors on damaged bytes are of any kind
        raise CheckpointDamaged(f"{path.name} cannot be read ({type(error).__name__}: {error})") from error


def flat_settings(config: Config) -> Dict[str, Any]:
    """Every setting of a config as "section.sub.key" → value."""
    flat = {}
    for name, value in config.items():
        if isinstance(value, dict):
            flat.update({f"{name}.{key}": inner for key, inner in flat_settings(value).items()})
        else:
            flat[name] = value
    return flat


def check_same_settings(saved: Config, current: Config, checkpoint: Path, start_over: str) -> None:
    """A resumed run must train as the checkpoint's did: only CHANGEABLE_SETTINGS may differ; a refusal
    ends with `start_over` (`ways_to_start_over`)."""
    before, now = flat_settings(saved), flat_settings(current)
    changed = sorted(key for key in before.keys() | now.keys() if before.get(key) != now.get(key))
    changed = [key for key in changed if key not in CHANGEABLE_SETTINGS]
    if changed:
        raise ResumeError(
            f"{checkpoint} was trained with other settings ({', '.join(changed)}); only "
            f"{' and '.join(CHANGEABLE_SETTINGS)} may change on resuming: {start_over}"
        )


def ways_to_start_over(checkpoints_elsewhere: bool) -> str:
    """What a refused resume tells the user to do. Checkpoints outside the output (--checkpoints) would
    meet a new --output again: a fresh start there needs a new checkpoints folder too."""
    fresh = "a new --output and --checkpoints" if checkpoints_elsewhere else "a new --output"
    return f"add --restart to start over (it deletes them), or train into {fresh}"


class ReplayedSteps:
    """The first `done` steps, replayed: each one's batch emptied (nothing trains on it) and its
    evaluation answered from the recorded history."""

    def __init__(self, done: int, history: List[Dict[str, Any]]):
        self.done = done
        self.recorded = [entry for entry in history if entry["step"] < done]
        self.step = -1

    def batches(self, stream: Iterator, random_state, seed: int) -> Iterator:
        """`stream` under its own Python random state; replayed steps' batches empty; CuPy reseeded per step."""
        for self.step, (epoch, batch) in enumerate(own_random_state(stream, random_state)):
            reseed_gpu_generator(seed, self.step)
            yield epoch, ([] if self.step < self.done else batch)

    def evaluation(self, evaluate):
        def evaluate_or_replay():
            if self.step >= self.done:
                return evaluate()
            if not self.recorded or self.recorded[0]["step"] != self.step:
                raise ResumeError(f"replaying step {self.step}: its evaluation is not in the checkpoint's history")
            entry = self.recorded.pop(0)
            return entry["score"], entry["other_scores"]

        return evaluate_or_replay


def own_random_state(stream: Iterator, state) -> Iterator:
    """`stream`, each item drawn under its own Python random state (from `state`); the global one is left as it was."""
    while True:
        outer = random.getstate()
        random.setstate(state)
        try:
            item = next(stream)
        except StopIteration:
            return
        finally:
            state = random.getstate()
            random.setstate(outer)
        yield item


@contextmanager
def stop_requests() -> Iterator[List[str]]:
    """The names of the stop signals received (at most one): the first asks to stop at the next
    checkpoint; a second one acts as it would without this (SIGINT: KeyboardInterrupt, SIGTERM: exit)."""
    received: List[str] = []
    # a signal the command was started ignoring (nohup's SIGHUP) stays ignored, as in every command
    handlers = {number: signal.getsignal(number) for number in STOP_SIGNALS}
    previous = {number: handler for number, handler in handlers.items() if handler is not signal.SIG_IGN}

    def request_stop(number, frame):
        received.append(signal.Signals(number).name)
        for other, handler in previous.items():
            signal.signal(other, handler)
        notice = f"{received[0]}: stopping after the step in progress, at a checkpoint (again to stop at once)\n"
        with suppress(OSError):  # straight to the descriptor: the stream may be in the middle of a write
            os.write(2, notice.encode())

    for number in previous:
        signal.signal(number, request_stop)
    try:
        yield received
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


class ResumableRun:
    """One call's training: spaCy's `train` (spacy/training/loop.py) with checkpoints and a resume."""

    def __init__(self, nlp, output_path, root, saved, progress, checkpoint_every, keep, use_gpu, kept_best=None):
        self.nlp, self.output_path, self.root, self.kept_best = nlp, output_path, root, kept_best
        self.saved: Optional[SavedState] = saved
        self.resumed_from, self.progress = saved.path if saved else None, progress
        self.checkpoint_every, self.keep = checkpoint_every, keep
        config = nlp.config.interpolate()
        self.seed = config["training"]["seed"]
        if self.seed is None:
            raise ResumeError("training.seed is null: a resumed run could not replay the batches; set a seed")
        fix_random_seed(self.seed)
        if use_gpu >= 0 and config["training"]["gpu_allocator"]:
            set_gpu_allocator(config["training"]["gpu_allocator"])
        self.T = util.registry.resolve(config["training"], schema=ConfigSchemaTraining)
        self.train_corpus, self.dev_corpus = util.resolve_dot_names(
            config, [self.T["train_corpus"], self.T["dev_corpus"]]
        )
        self.optimizer = self.T["optimizer"]
        self.before_to_disk = create_before_to_disk_callback(self.T["before_to_disk"])
        self.written: Optional[Path] = None
        self.seconds_offset, self.words_offset = 0, 0  # what the steps before a resume took
        self.started, self.cpu_at_start = time.monotonic(), cpu_seconds()
        progress.pieces.append({"from_step": progress.steps})
        self.update_piece()

    def steps(self, replay: ReplayedSteps):
        T = self.T
        batches = create_train_batches(self.nlp, self.train_corpus, T["batcher"], T["max_epochs"])
        return train_while_improving(
            self.nlp,
            self.optimizer,
            replay.batches(batches, random.getstate(), self.seed),
            replay.evaluation(create_evaluation_callback(self.nlp, self.dev_corpus, T["score_weights"])),
            dropout=T["dropout"],
            accumulate_gradient=T["accumulate_gradient"],
            patience=T["patience"],
            max_steps=T["max_steps"],
            eval_frequency=T["eval_frequency"],
            exclude=T["frozen_components"],
            annotating_components=T["annotating_components"],
            before_update=T["before_update"],
        )

    def train(self, stdout: IO, stderr: IO) -> TrainingOutcome:
        msg, T, progress = Printer(no_print=True), self.T, self.progress
        done = checkpointed = progress.steps
        replay = ReplayedSteps(done, progress.history)
        steps = self.steps(replay)
        self.output_path.mkdir(parents=True, exist_ok=True)  # beside checkpoints of its own, nothing made it yet
        if self.resumed_from is None:
            clean_output_dir(self.output_path)
        else:
            stdout.write(msg.info(f"Resuming from {self.resumed_from}: {done} steps done") + "\n")
            self.bring_back_best()
        stdout.write(msg.info(f"Pipeline: {self.nlp.pipe_names}") + "\n")
        if self.resumed_from is None:
            stdout.write(msg.info(f"Initial learn rate: {self.optimizer.learn_rate}") + "\n")
        with self.nlp.select_pipes(disable=T["frozen_components"]):
            log_step, finalize_logger = T["logger"](self.nlp, stdout, stderr)
        restored = done == 0
        with stop_requests() as stop:
            try:
                for _, info, is_best in steps:
                    if info["step"] == done - 1:
                        self.restore(info)
                        restored = True
                    elif info["step"] >= done:
                        self.record(info, is_best)
                        if stop or progress.steps % self.checkpoint_every == 0:  # first: after SIGHUP, output may fail
                            checkpointed = self.write_checkpoint()
                        log_step(info if is_best is not None else None)
                    if stop:
                        break
                if not restored and not stop:
                    raise ResumeError(
                        f"{self.resumed_from}: training stopped after {replay.step + 1} replayed steps, before the "
                        f"checkpoint's {done} (a lower training.max_steps or patience than when it was written?)"
                    )
                if restored and progress.steps != checkpointed:
                    self.write_checkpoint()
            finally:
                finalize_logger()
                if restored:
                    self.save_pipelines(is_best=False)
                    self.update_piece()
                    pieces = [piece for piece in progress.pieces if piece["to_step"] > piece["from_step"]]
                    srsly.write_json(self.output_path / PIECES_FILE, pieces)
        if restored:
            stdout.write(msg.good("Saved pipeline to output directory", self.output_path / DIR_MODEL_LAST) + "\n")
        stopped_by = stop[0] if stop else None
        model_last = self.output_path / DIR_MODEL_LAST
        newest = self.written or self.resumed_from
        return TrainingOutcome(model_last, progress.steps, stopped_by, self.resumed_from, newest)

    def record(self, info: Dict[str, Any], is_best: Optional[bool]) -> None:
        """A step trained: its evaluation saved as spaCy saves it, and the progress a checkpoint records."""
        progress = self.progress
        info["seconds"] += self.seconds_offset
        info["words"] += self.words_offset
        if is_best is not None:
            with self.nlp.select_pipes(disable=self.T["frozen_components"]):
                update_meta(self.T, self.nlp, info)
            self.save_pipelines(is_best)
            info["output_path"] = str(self.output_path / DIR_MODEL_LAST)
            progress.history.append({key: info[key] for key in ("step", "score", "other_scores")})
        progress.steps, progress.epoch = info["step"] + 1, info["epoch"]
        progress.losses = {} if is_best is not None else dict(info["losses"])  # spaCy resets them after an evaluation
        progress.seconds, progress.words = info["seconds"], info["words"]

    def restore(self, info: Dict[str, Any]) -> None:
        """At the last replayed step: the checkpoint's weights, optimizer state, losses and random states.
        A checkpoint with sizes only may hold damage that only this finds: a one-line error."""
        saved, self.saved = self.saved, None  # its arrays are the optimizer's from here on
        try:
            self.nlp.from_disk(saved.path / PIPELINE_DIR, exclude=["config"])  # the config stays this run's
            restore_optimizer(self.optimizer, self.nlp, saved.optimizer)
        except Exception as error:
            if saved.proven or isinstance(error, ResumeError):
                raise
            raise ResumeError(
                f"{saved.path} cannot be restored ({type(error).__name__}: {error}): it is damaged though its sizes "
                f"are right; move it aside to resume from an older checkpoint, or add --restart to start over"
            ) from error
        info["losses"].update(self.progress.losses)  # the loop's own dict: it goes on adding to it
        self.seconds_offset, self.words_offset = self.progress.seconds - info["seconds"], self.progress.words
        restore_random_states(saved.random)

    def update_piece(self) -> None:
        """This call's piece of the run, as far as it has come."""
        self.progress.pieces[-1].update(
            to_step=self.progress.steps,
            wall_seconds=round(time.monotonic() - self.started, 1),
            cpu_seconds=round(cpu_seconds() - self.cpu_at_start, 1),
            peak_rss_mb=peak_rss_mb(),
        )

    def write_checkpoint(self) -> int:
        """A checkpoint of the steps done so far; their number."""
        nlp, optimizer, progress = self.nlp, self.optimizer, self.progress
        self.update_piece()

        def write(folder: Path) -> None:
            nlp.to_disk(folder / PIPELINE_DIR)
            srsly.write_msgpack(folder / OPTIMIZER_FILE, optimizer_state(optimizer, nlp))
            srsly.write_msgpack(folder / RANDOM_FILE, random_states())
            srsly.write_json(folder / PROGRESS_FILE, asdict(progress))

        self.written = write_checkpoint(self.root, progress.steps, write, self.keep)
        return progress.steps

    def save_pipelines(self, is_best: bool) -> None:
        """model-last, and model-best when `is_best`, as spaCy's `train` writes them (with the averages);
        an error of the disk (a full one) names the folder."""
        last, best = self.output_path / DIR_MODEL_LAST, self.output_path / DIR_MODEL_BEST
        with naming_path(last), self.nlp.use_params(self.optimizer.averages):
            self.before_to_disk(self.nlp).to_disk(last)
        if is_best:
            with naming_path(best):
                if best.exists():
                    shutil.rmtree(best)
                shutil.copytree(last, best)
            if self.kept_best is not None:
                with naming_path(self.kept_best):
                    keep_best(best, self.kept_best)

    def bring_back_best(self) -> None:
        """A resume into an output without model-best (a fresh checkout) copies the one kept beside the checkpoints."""
        best = self.output_path / DIR_MODEL_BEST
        if self.kept_best is not None and self.kept_best.is_dir() and not best.exists():
            with naming_path(best):
                shutil.copytree(self.kept_best, best)
