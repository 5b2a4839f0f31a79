"""Scratch beside a target and folders swapped by rename (`spacy_pairatt.runs.scratch`), under the stop
signals of `spacy_pairatt.runs.signals`: a stopped write leaves the old folder and no scratch, a stop
during the swap is taken once the new folder is in place, a killed run's scratch is removed (or put
back) by the next run, and nothing that is not scratch is ever touched; a pipeline folder given as a
link is replaced where the link points, and a full disk's error names the folder."""

import os
import signal
import subprocess
import sys

import pytest

from bench.reliability import file_size_limit
from spacy_pairatt.runs import scratch
from spacy_pairatt.runs.scratch import remove_stale_scratch, replace_folder, replace_pipeline_folder, scratch_path
from spacy_pairatt.runs.signals import Interrupted, stop_signals_held, stop_signals_interrupt


def dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True).stdout)


def folder_with(path, name, text):
    path.mkdir()
    (path / name).write_text(text)


def contents(folder):
    return {path.name: path.read_text() for path in folder.iterdir()}


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stop_while_writing_keeps_the_old_folder(tmp_path, stop):
    target = tmp_path / "model"
    folder_with(target, "weights", "old")

    def write(folder):
        (folder / "weights").write_text("half of the new")
        os.kill(os.getpid(), stop)

    with pytest.raises(Interrupted, match=signal.Signals(stop).name), stop_signals_interrupt():
        replace_folder(target, write)
    assert contents(target) == {"weights": "old"} and os.listdir(tmp_path) == ["model"]


@pytest.mark.parametrize("can_exchange", [True, False])
def test_a_stop_during_the_swap_is_taken_once_the_new_folder_is_in_place(tmp_path, monkeypatch, can_exchange):
    target = tmp_path / "model"
    folder_with(target, "weights", "old")
    swap = scratch.swap_into_place

    def swap_then_stop(new, old):
        os.kill(os.getpid(), signal.SIGTERM)  # held: taken when the step is done
        return swap(new, old)

    monkeypatch.setattr(scratch, "swap_into_place", swap_then_stop)
    if not can_exchange:  # the two renames of file systems without an atomic exchange
        monkeypatch.setattr(scratch, "exchange", lambda first, second: False)
    with pytest.raises(Interrupted), stop_signals_interrupt():
        replace_folder(target, lambda folder: (folder / "weights").write_text("new"))
    assert contents(target) == {"weights": "new"} and os.listdir(tmp_path) == ["model"]


def test_held_steps_take_a_stop_at_their_end_but_not_over_their_own_error():
    with stop_signals_interrupt():
        with pytest.raises(Interrupted):
            with stop_signals_held():
                os.kill(os.getpid(), signal.SIGHUP)
                done = True
        assert done
        with pytest.raises(ValueError):
            with stop_signals_held():
                os.kill(os.getpid(), signal.SIGHUP)
                raise ValueError("the step's own error")


def test_a_killed_runs_scratch_is_removed_and_a_folder_kept_aside_is_put_back(tmp_path):
    target, dead = tmp_path / "model", dead_pid()
    kept_aside = tmp_path / f".model.previous-{dead}-0123abcd"
    folder_with(kept_aside, "weights", "old")  # killed between the two renames: no `model`
    staging = tmp_path / f".model.staging-{dead}-89abcdef"
    folder_with(staging, "weights", "new, unfinished")
    partial = tmp_path / f".model.partial-{dead}-01234567"
    partial.write_text("")
    mine = [
        tmp_path / name
        for name in (".model.previous", f".model.notes-{dead}-0123abcd", f".other.staging-{dead}-0123abcd")
    ]
    for path in mine:
        path.write_text("the user's")
    running = scratch_path(target, "staging")  # this process's: in use
    running.mkdir()
    assert sorted(remove_stale_scratch(target)) == sorted([staging, partial])
    assert contents(target) == {"weights": "old"}
    assert sorted(os.listdir(tmp_path)) == sorted(["model", running.name] + [path.name for path in mine])


@pytest.mark.parametrize("there", ["a pipeline", "nothing yet"])
def test_a_link_to_a_pipeline_folder_is_followed_and_kept(tmp_path, there):
    """`calibrate LINK` replaced the link by a folder and left the pipeline it names uncalibrated; `parse
    --output LINK` writes through the link: a pipeline folder given as a link is replaced where it points."""
    pipeline, link = tmp_path / "pipelines" / "cs", tmp_path / "cslink"
    pipeline.parent.mkdir()
    if there == "a pipeline":
        folder_with(pipeline, "config.cfg", "old")
    link.symlink_to(pipeline)
    replace_pipeline_folder(link, lambda folder: (folder / "config.cfg").write_text("new"))
    assert link.is_symlink() and os.readlink(link) == str(pipeline)
    assert contents(pipeline) == {"config.cfg": "new"}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["cslink", "pipelines"]
    assert [path.name for path in pipeline.parent.iterdir()] == ["cs"]


def test_a_full_disk_while_a_folder_is_written_names_the_folder(tmp_path):
    """write() of a full disk names no file; the command's one-line error names the folder it replaces."""
    target = tmp_path / "model"
    folder_with(target, "config.cfg", "old")
    with pytest.raises(OSError) as raised, file_size_limit(1000):
        replace_pipeline_folder(target, lambda folder: (folder / "config.cfg").write_text("x" * 5000))
    assert raised.value.filename == str(target) and raised.value.strerror == "File too large"
    assert contents(target) == {"config.cfg": "old"} and [path.name for path in tmp_path.iterdir()] == ["model"]


def test_a_rust_librarys_disk_error_is_one_naming_the_folder(tmp_path):
    """Hugging Face's tokenizers (Rust) raise a bare Exception for a full disk while a pipeline is saved:
    it becomes the OSError it stands for, naming the folder (a one-line error, not a traceback)."""

    def failing_save(message):
        def save(folder):
            raise Exception(message)

        return save

    with pytest.raises(OSError) as raised:
        replace_pipeline_folder(tmp_path / "model", failing_save("File too large (os error 27)"))
    assert (raised.value.errno, raised.value.filename) == (27, str(tmp_path / "model"))
    with pytest.raises(Exception, match="^not about a file$"):  # any other error stays as it is
        replace_pipeline_folder(tmp_path / "model", failing_save("not about a file"))
    assert list(tmp_path.iterdir()) == []
