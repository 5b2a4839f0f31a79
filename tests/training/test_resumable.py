"""Resumable training: a run stopped by SIGTERM and resumed ends where a run never stopped ends,
weights and dev scores alike; a checkpoint cut short or damaged in any byte is never the one resumed
from, and what was trained is never deleted unless --restart asks.

On the tiny random BERT and 60 EWT train sentences, 25 steps (0 to 24): about 70 s of CPU in all for
the three trainings (straight, stopped, resumed), so far fewer steps than the issue's 2,000, which would
take 20 minutes; the run goes into a third epoch and crosses four evaluations and several checkpoints,
which is where a resume can go wrong.
"""

import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy
import pytest
import spacy
import srsly
from spacy.tokens import DocBin

from bench.reliability import file_size_limit, pipeline_weights
from spacy_pairatt.training.checkpoints import (
    COMPLETION_MARKER,
    CheckpointDamaged,
    ResumeError,
    checkpoint_name,
    newest_readable,
    prove,
    write_checkpoint,
)
from spacy_pairatt.training.resumable import read_checkpoint, resumable_state, train_resumable
from tests.conftest import REPO, UD_DIR, read_conllu_sentences

CONFIG = REPO / "configs" / "parser_minilm.cfg"
STEPS = 24  # training.max_steps: steps 0 to 24, 25 in all


@pytest.fixture(scope="module")
def overrides(tiny_bert_dir, ud_train_docs, tmp_path_factory):
    folder = tmp_path_factory.mktemp("resumable_data")
    DocBin(docs=ud_train_docs).to_disk(folder / "train.spacy")
    DocBin(docs=read_conllu_sentences(UD_DIR / "en_ewt-ud-dev.conllu", 16)).to_disk(folder / "dev.spacy")
    return {
        "paths.train": str(folder / "train.spacy"),
        "paths.dev": str(folder / "dev.spacy"),
        "components.transformer.model.name": tiny_bert_dir,
        "training.max_steps": STEPS,
        "training.eval_frequency": 8,
        "training.batcher.size": 150,  # about 6 sentences a batch: 60 sentences are 2 epochs
        "training.optimizer.learn_rate.warmup_steps": 4,
        "training.optimizer.learn_rate.total_steps": 40,
        # Bit for bit across processes is float32's: in bfloat16 a resumed run ends within rounding of
        # a straight one, not equal to it (docs/training.md#resumable-training)
        "components.transformer.model.precision": "float32",
    }


@pytest.fixture(scope="module")
def straight_run(overrides, tmp_path_factory):
    output = tmp_path_factory.mktemp("straight")
    outcome = train_resumable(CONFIG, output, checkpoint_every=100, overrides=overrides)
    assert outcome.steps == STEPS + 1 and outcome.stopped_by is None and outcome.resumed_from is None
    return output


@pytest.fixture(scope="module")
def resumed_run(overrides, tmp_path_factory):
    """A subprocess of the command, stopped by SIGTERM once it has written a checkpoint, then resumed here."""
    output = tmp_path_factory.mktemp("resumed")
    command = [sys.executable, "-m", "spacy_pairatt", "train-resumable", str(CONFIG), "--output", str(output)]
    command += ["--checkpoint-every", "5", *(f"--{key}={value}" for key, value in overrides.items())]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = output / "checkpoints" / checkpoint_name(5) / COMPLETION_MARKER
    while not first.exists() and process.poll() is None:
        time.sleep(0.2)
    process.send_signal(signal.SIGTERM)
    log, _ = process.communicate(timeout=300)
    assert process.returncode == 128 + signal.SIGTERM, log
    assert "SIGTERM: stopped after" in log
    interrupted = srsly.read_json(final_checkpoint(output) / "progress.json")
    assert 5 <= interrupted["steps"] < STEPS
    outcome = train_resumable(CONFIG, output, checkpoint_every=5, overrides=overrides)
    assert outcome.resumed_from.name == checkpoint_name(interrupted["steps"]) and outcome.steps == STEPS + 1
    return output


def test_each_call_of_a_run_is_a_piece_of_its_cost(straight_run, resumed_run):
    """The stopped call's piece ends at the checkpoint resumed from (its steps after it were lost, so not
    counted) and the resumed call's takes over there; a run never stopped is one piece."""
    pieces = srsly.read_json(resumed_run / "training_pieces.json")
    resumed_from = pieces[0]["to_step"]  # the step the fixture's SIGTERM stopped it at, which writes a checkpoint
    assert 5 <= resumed_from < STEPS
    steps = [(piece["from_step"], piece["to_step"]) for piece in pieces]
    assert steps == [(0, resumed_from), (resumed_from, STEPS + 1)]
    straight = srsly.read_json(straight_run / "training_pieces.json")
    assert [(piece["from_step"], piece["to_step"]) for piece in straight] == [(0, STEPS + 1)]
    for piece in pieces + straight:
        assert piece["wall_seconds"] > 0 and piece["cpu_seconds"] > 0 and piece["peak_rss_mb"] > 100
    # the final checkpoint's record: the stopped call's piece as it is, this call's as far as that checkpoint
    in_checkpoint = srsly.read_json(final_checkpoint(resumed_run) / "progress.json")["pieces"]
    assert in_checkpoint[0] == pieces[0] and in_checkpoint[1]["to_step"] == STEPS + 1


def final_checkpoint(output):
    saved, damaged = newest_readable(output / "checkpoints", read_checkpoint)
    assert damaged == []
    return saved.path


def test_a_stopped_and_resumed_run_ends_as_a_straight_run(straight_run, resumed_run):
    for folder in ("model-last", "model-best"):
        straight, resumed = pipeline_weights(straight_run / folder), pipeline_weights(resumed_run / folder)
        assert len(straight) == len(resumed) > 0
        for before, after in zip(straight, resumed):
            # to float tolerance: a matmul's last bits may follow its operands' memory alignment (seen once
            # in about ten runs: one weight in a million 3e-7 apart)
            numpy.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-6)
    straight, resumed = (srsly.read_json(run / "model-last" / "meta.json") for run in (straight_run, resumed_run))
    (straight_scores, straight_losses), (resumed_scores, resumed_losses) = map(scores_and_losses, (straight, resumed))
    assert straight_scores == resumed_scores and straight_scores["dep_uas"] > 0
    assert resumed_losses == pytest.approx(straight_losses, rel=1e-5)


def scores_and_losses(meta: dict):
    """A run's dev scores, compared exactly, and its losses (sums over steps), to float tolerance."""
    performance = meta["performance"]
    losses = {key: value for key, value in performance.items() if key.endswith("_loss")}
    return {key: value for key, value in performance.items() if key not in losses}, losses


def test_the_score_history_is_the_straight_runs(straight_run, resumed_run):
    """Every evaluation (steps 0, 8, 16, 24), before the stop and after it, scored as in the straight run
    (all but the words per second)."""
    histories = [srsly.read_json(final_checkpoint(run) / "progress.json") for run in (straight_run, resumed_run)]
    for history in histories:
        for entry in history["history"]:
            assert entry["other_scores"].pop("speed") > 0
    assert [entry["step"] for entry in histories[0]["history"]] == [0, 8, 16, 24]
    assert histories[0]["history"] == histories[1]["history"]
    assert histories[0]["words"] == histories[1]["words"] and histories[0]["epoch"] == histories[1]["epoch"] == 2


def test_only_the_newest_checkpoints_are_kept(resumed_run):
    kept = sorted(path.name for path in (resumed_run / "checkpoints").iterdir() if not path.name.startswith("."))
    assert kept == [checkpoint_name(20), checkpoint_name(STEPS + 1)]


def test_a_resume_with_other_settings_is_refused(resumed_run, overrides):
    with pytest.raises(ResumeError, match=r"other settings \(training\.dropout\)"):
        train_resumable(CONFIG, resumed_run, checkpoint_every=5, overrides={**overrides, "training.dropout": 0.3})


def test_a_checkpoint_cut_short_is_never_resumed_from(tmp_path):
    """A write killed midway leaves a hidden partial folder; a folder without its marker, or with a file
    shorter than the marker says, is passed over for an older complete one."""

    def write(folder):
        (folder / "weights.bin").write_bytes(b"\0" * 1000)

    def killed_write(folder):
        write(folder)
        raise KeyboardInterrupt

    complete = write_checkpoint(tmp_path, 3, write, keep=4)
    with pytest.raises(KeyboardInterrupt):
        write_checkpoint(tmp_path, 4, killed_write, keep=4)
    assert [path.name.split(".partial-")[0] for path in tmp_path.glob(".step-*")] == [f".{checkpoint_name(4)}"]
    truncated, unmarked = (write_checkpoint(tmp_path, step, write, keep=4) for step in (5, 6))
    os.truncate(truncated / "weights.bin", 10)
    (unmarked / COMPLETION_MARKER).unlink()
    found, damaged = newest_readable(tmp_path, lambda checkpoint: prove(checkpoint) and checkpoint)
    assert found == complete
    assert damaged == [(unmarked, f"no {COMPLETION_MARKER} (its write was cut short)"),
                       (truncated, "weights.bin is 10 bytes, not the 1000 written")]  # fmt: skip
    assert json.loads((complete / COMPLETION_MARKER).read_text())["files"] == {
        "weights.bin": {"bytes": 1000, "sha256": hashlib.sha256(b"\0" * 1000).hexdigest()}
    }
    write_checkpoint(tmp_path, 7, write, keep=1)  # the older, the cut-short and the partial folders go
    assert sorted(path.name for path in tmp_path.iterdir()) == [checkpoint_name(7)]


def flip_bytes(path, count=16):
    """`count` bytes in the middle of a file inverted: its size stays."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + count] = bytes(255 - byte for byte in data[middle : middle + count])
    path.write_bytes(bytes(data))


def edit_steps(path):
    """progress.json still valid JSON, of the same size, claiming 24 steps for 25 (as a user might edit it)."""
    text = path.read_text()
    edited = re.sub(r'("steps":\s*)25\b', r"\g<1>24", text)
    assert edited != text
    path.write_text(edited)


def cut_short(path):
    os.truncate(path, path.stat().st_size - 10)


def add_notes(path):
    path.write_text("a file of the user's")


def garble(path):
    path.write_text("{not json")


# What is damaged in the newest checkpoint, how, and the reason a resume must give (a regular expression).
DAMAGE = [
    pytest.param("pipeline/transformer/model", flip_bytes, "pipeline/transformer/model is not the file", id="weights"),
    pytest.param("optimizer.msgpack", flip_bytes, r"optimizer\.msgpack is not the file written", id="optimizer"),
    pytest.param("random.msgpack", flip_bytes, r"random\.msgpack is not the file written", id="random"),
    pytest.param("progress.json", flip_bytes, r"progress\.json is not the file written", id="progress"),
    pytest.param("progress.json", edit_steps, r"progress\.json is not the file written", id="progress-edited"),
    pytest.param("optimizer.msgpack", cut_short, r"optimizer\.msgpack is \d+ bytes, not the \d+ written", id="cut"),
    pytest.param("random.msgpack", os.unlink, r"random\.msgpack is missing", id="missing"),
    pytest.param("pipeline/notes.txt", add_notes, "pipeline/notes.txt is not one of its files", id="added"),
    pytest.param(COMPLETION_MARKER, os.unlink, f"no {COMPLETION_MARKER}", id="no-marker"),
    pytest.param(COMPLETION_MARKER, garble, f"{COMPLETION_MARKER} cannot be read", id="marker"),
]


def training_config(overrides):
    """The config as train_resumable reads it."""
    return spacy.util.load_config(CONFIG, overrides=overrides, interpolate=False)


def checkpoint_folders(root):
    return sorted(path.name for path in root.iterdir() if path.is_dir())


@pytest.fixture
def trained_copy(resumed_run, tmp_path):
    """A copy of the resumed run's output: model-best, model-last and checkpoints 20 and 25."""
    output = tmp_path / "output"
    shutil.copytree(resumed_run, output)
    return output


@pytest.mark.parametrize("name,damage,reason", DAMAGE)
def test_a_damaged_checkpoint_is_named_set_aside_and_the_one_before_resumed_from(
    trained_copy, overrides, name, damage, reason
):
    root = trained_copy / "checkpoints"
    newest = root / checkpoint_name(STEPS + 1)
    damage(newest / name)
    warnings = io.StringIO()
    saved = resumable_state(trained_copy, root, training_config(overrides), warnings)
    assert saved.path == root / checkpoint_name(20) and saved.proven and saved.progress.steps == 20
    assert re.search(rf"{re.escape(str(newest))}: damaged, not resumed from \({reason}", warnings.getvalue())
    assert checkpoint_folders(root) == [checkpoint_name(20), f"{checkpoint_name(STEPS + 1)}.damaged"]


def test_a_checkpoint_with_sizes_only_is_resumed_from_with_a_warning_and_its_decode_errors_found(
    trained_copy, overrides
):
    """Checkpoints written before COMPLETE held SHA-256s: same-size damage that breaks a file's decoding
    is still found; the newest that reads is resumed from, named as not proven."""
    root = trained_copy / "checkpoints"
    for step in (20, STEPS + 1):
        marker_path = root / checkpoint_name(step) / COMPLETION_MARKER
        marker = json.loads(marker_path.read_text())
        marker["files"] = {name: record["bytes"] for name, record in marker["files"].items()}
        marker_path.write_text(json.dumps(marker))
    newest = root / checkpoint_name(STEPS + 1)
    (newest / "progress.json").write_text("x" * (newest / "progress.json").stat().st_size)
    with pytest.raises(CheckpointDamaged, match=r"^progress\.json cannot be read \("):
        read_checkpoint(newest)
    warnings = io.StringIO()
    saved = resumable_state(trained_copy, root, training_config(overrides), warnings)
    assert saved.path == root / checkpoint_name(20) and not saved.proven
    assert f"{saved.path}: written before checkpoints recorded SHA-256s" in warnings.getvalue()


def test_a_damaged_checkpoint_is_kept_until_the_run_passes_it_and_the_run_ends_as_a_straight_run(
    straight_run, trained_copy, overrides
):
    """Step 25 damaged: the run resumes from step 20 and stops at 22 (a lower max_steps), keeping the
    damaged one aside; continued, it writes step 25 again, drops the damaged one and ends as a straight run."""
    root = trained_copy / "checkpoints"
    flip_bytes(root / checkpoint_name(STEPS + 1) / "pipeline" / "transformer" / "model")
    shorter = {**overrides, "training.max_steps": 21}
    stopped = train_resumable(CONFIG, trained_copy, checkpoint_every=5, overrides=shorter)
    assert stopped.resumed_from == root / checkpoint_name(20) and stopped.steps == 22
    aside = f"{checkpoint_name(STEPS + 1)}.damaged"
    assert checkpoint_folders(root) == [checkpoint_name(20), checkpoint_name(22), aside]
    finished = train_resumable(CONFIG, trained_copy, checkpoint_every=5, overrides=overrides)
    assert finished.resumed_from == root / checkpoint_name(22) and finished.steps == STEPS + 1
    assert checkpoint_folders(root) == [checkpoint_name(22), checkpoint_name(STEPS + 1)]
    for before, after in zip(
        pipeline_weights(straight_run / "model-last"), pipeline_weights(trained_copy / "model-last")
    ):
        numpy.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-6)
    straight, resumed = (srsly.read_json(run / "model-last" / "meta.json") for run in (straight_run, trained_copy))
    assert scores_and_losses(straight)[0] == scores_and_losses(resumed)[0]


@pytest.mark.parametrize("removed", ["both checkpoints damaged", "checkpoints deleted"])
def test_a_training_with_no_checkpoint_to_resume_from_is_refused_and_left_as_it_was(trained_copy, overrides, removed):
    root = trained_copy / "checkpoints"
    if removed == "checkpoints deleted":
        shutil.rmtree(root)
        expected = r"holds a training \(model-best, model-last\) but no checkpoint to resume from: add --restart"
    else:
        for step in (20, STEPS + 1):
            flip_bytes(root / checkpoint_name(step) / "optimizer.msgpack")
        expected = (
            r"holds a training \(model-best, model-last, checkpoints/step-00000025, checkpoints/step-00000020\) but "
            r"no checkpoint to resume from; step-00000025: optimizer\.msgpack is not the file written .*; "
            r"step-00000020: .*: add --restart to start over"
        )
    before = {path: path.read_bytes() for path in trained_copy.rglob("*") if path.is_file() and path.name != ".lock"}
    with pytest.raises(ResumeError, match=expected):
        train_resumable(CONFIG, trained_copy, checkpoint_every=5, overrides=overrides)
    after = {path: path.read_bytes() for path in trained_copy.rglob("*") if path.is_file() and path.name != ".lock"}
    assert after == before


def test_a_finished_run_rerun_trains_nothing_and_keeps_its_checkpoints(trained_copy, overrides):
    root = trained_copy / "checkpoints"
    before = {path: path.read_bytes() for path in root.rglob("*") if path.is_file() and path.name != ".lock"}
    weights = pipeline_weights(trained_copy / "model-last")
    outcome = train_resumable(CONFIG, trained_copy, checkpoint_every=5, overrides=overrides)
    assert outcome.resumed_from == root / checkpoint_name(STEPS + 1) and outcome.steps == STEPS + 1
    assert {path: path.read_bytes() for path in root.rglob("*") if path.is_file() and path.name != ".lock"} == before
    for saved, again in zip(weights, pipeline_weights(trained_copy / "model-last")):
        numpy.testing.assert_array_equal(again, saved)


def test_restart_starts_over_and_deletes_what_was_there(trained_copy, overrides):
    root = trained_copy / "checkpoints"
    flip_bytes(root / checkpoint_name(20) / "optimizer.msgpack")
    set_aside = root / f"{checkpoint_name(30)}.damaged"
    shutil.copytree(root / checkpoint_name(20), set_aside)
    outcome = train_resumable(
        CONFIG, trained_copy, checkpoint_every=5, overrides={**overrides, "training.max_steps": 2}, restart=True
    )
    assert outcome.resumed_from is None and outcome.steps == 3
    assert checkpoint_folders(root) == [checkpoint_name(3)]
    assert srsly.read_json(trained_copy / "model-last" / "meta.json")["performance"]["dep_uas"] is not None


def test_a_checkpoint_folder_is_made_as_the_umask_says(tmp_path):
    """mkdtemp makes its folder for its owner alone; a checkpoint is as shareable as the rest of the output."""
    previous = os.umask(0o027)
    try:
        checkpoint = write_checkpoint(tmp_path, 1, lambda folder: (folder / "a").write_text("a"), keep=1)
    finally:
        os.umask(previous)
    assert checkpoint.stat().st_mode & 0o777 == 0o750


def test_a_full_disk_while_a_checkpoint_is_written_names_it(tmp_path):
    """write() of a full disk names no file: the error names the checkpoint (a one-line error of the command)."""

    def large(folder):
        (folder / "weights.bin").write_bytes(b"\0" * 100_000)

    with pytest.raises(OSError) as raised, file_size_limit(10_000):
        write_checkpoint(tmp_path, 1, large, keep=1)
    assert raised.value.filename == str(tmp_path / checkpoint_name(1)) and raised.value.strerror == "File too large"


def test_checkpoints_outside_the_output_resume_into_a_fresh_one_with_its_model_best(overrides, tmp_path):
    """--checkpoints elsewhere (a cache that outlives the checkout): a run into a new, empty output, as
    in a fresh clone, resumes from them and gets the first output's model-best back; --restart deletes
    only what the training wrote there, not a file of the user's in the same folder."""
    checkpoints, first, fresh = tmp_path / "cache" / "run", tmp_path / "first", tmp_path / "fresh"
    shorter = {**overrides, "training.max_steps": 9}
    train_resumable(CONFIG, first, checkpoint_every=5, overrides=shorter, checkpoints_path=checkpoints)
    assert not (first / "checkpoints").exists()
    assert checkpoint_folders(checkpoints) == ["model-best", checkpoint_name(5), checkpoint_name(10)]
    outcome = train_resumable(CONFIG, fresh, checkpoint_every=5, overrides=shorter, checkpoints_path=checkpoints)
    assert outcome.resumed_from == checkpoints / checkpoint_name(10) and outcome.steps == 10
    kept, original = pipeline_weights(fresh / "model-best"), pipeline_weights(first / "model-best")
    assert len(kept) == len(original) > 0
    for again, saved in zip(kept, original):
        numpy.testing.assert_array_equal(again, saved)
    other = {**shorter, "training.dropout": 0.3}
    with pytest.raises(ResumeError, match=r"other settings \(training\.dropout\).*a new --output and --checkpoints$"):
        train_resumable(CONFIG, tmp_path / "another", checkpoint_every=5, overrides=other, checkpoints_path=checkpoints)
    (checkpoints / "notes.txt").write_text("mine")
    restarted = {**overrides, "training.max_steps": 2}
    train_resumable(CONFIG, fresh, checkpoint_every=5, overrides=restarted, checkpoints_path=checkpoints, restart=True)
    assert (checkpoints / "notes.txt").read_text() == "mine"
    assert checkpoint_folders(checkpoints) == ["model-best", checkpoint_name(3)]
