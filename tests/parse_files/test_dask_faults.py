"""`parse` on Dask: an interrupt (Ctrl-C to the process group, SIGTERM) or an input error
cancels the run, leaves no shard files, lets the same command run again at once, and prints one
line; a good run prints only its own line (Dask's and the workers' logs need --verbose).

The command runs as a fresh process on a LocalCluster of its own, with the fast (untrained
sentencizer + transition parser) pipeline of test_parse_faults.
"""

import logging
import os
import signal
import subprocess
import sys
import time

import pytest

from spacy_pairatt.parse_files import distributed
from spacy_pairatt.parse_files.errors import ParseCommandError
from spacy_pairatt.parse_files.files import OutputTarget
from tests.conftest import REPO
from tests.parse_files.test_parse_faults import build_fast_pipeline

pytest.importorskip("dask.distributed")

N_LINES, SHARD_SIZE = 2000, 200
WAIT_SECONDS = 300  # for the cluster to start under a loaded CI machine: a hang guard, not a timing


@pytest.fixture(scope="module")
def dask_files(tmp_path_factory):
    """(test_parse_faults' fast pipeline, saved where the workers load it; an input of N_LINES lines)."""
    folder = tmp_path_factory.mktemp("dask")
    build_fast_pipeline().to_disk(folder / "model")
    lines = (f"Line {i} is a sentence about the cat that sat on the mat near the door ." for i in range(N_LINES))
    (folder / "input.txt").write_text("\n".join(lines) + "\n", encoding="utf8")
    return str(folder / "model"), folder / "input.txt"


def dask_command(model, source, output, *options):
    return [sys.executable, "-m", "spacy_pairatt", "parse", str(model), str(source), "--output", str(output),
            "--dask-workers", "2", "--shard-size", str(SHARD_SIZE), "--no-progress", *options]  # fmt: skip


def default_sigint():
    """A terminal starts a command with SIGINT at its default; a child keeps an ignored one (and Python
    then installs no KeyboardInterrupt), so what this test process inherited or was left with must not pass on."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(command):
    """The command in a session of its own, as a terminal runs it: a Ctrl-C goes to the whole group."""
    return subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True, preexec_fn=default_sigint
    )


def wait_for(condition, what):
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.02)


def group_gone(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def stderr_lines(text):
    return [line for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("stop", ["sigint_to_group", "sigterm", "sighup_to_group"])
def test_an_interrupt_mid_run_leaves_no_shards_and_the_rerun_succeeds(dask_files, tmp_path, stop):
    """Sent while a task is writing its shard (its partial file exists); once every process of the run is
    gone, nothing is in the output directory, so no late write can come; the same command then succeeds.
    A killed run's staging folder (its process is gone) is removed by the rerun."""
    fast_model, long_input = dask_files
    output = tmp_path / "shards"
    process = start(dask_command(fast_model, long_input, output))
    wait_for(lambda: any(output.glob(".shards-run.staging-*/.shard-*.partial-*")), "a task writing its shard")
    if stop == "sigterm":
        process.send_signal(signal.SIGTERM)
    else:
        os.killpg(process.pid, signal.SIGINT if stop == "sigint_to_group" else signal.SIGHUP)
    _, stderr = process.communicate(timeout=WAIT_SECONDS)
    wait_for(lambda: group_gone(process.pid), "the workers to end")
    assert process.returncode == 1
    assert stderr_lines(stderr) == ["python -m spacy_pairatt parse: interrupted"]
    assert list(output.iterdir()) == []
    killed = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (output / f".shards-run.staging-{int(killed.stdout)}-0123abcd").mkdir()

    rerun = subprocess.run(dask_command(fast_model, long_input, output), capture_output=True, text=True, cwd=REPO,
                           timeout=WAIT_SECONDS)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert stderr_lines(rerun.stderr) == [f"Wrote {N_LINES // SHARD_SIZE} shards to {output}"]
    assert sorted(path.name for path in output.iterdir()) == [f"shard-{i:05d}.conllu" for i in range(10)]


def test_a_bad_input_line_is_one_line_and_leaves_no_shards(dask_files, tmp_path):
    """Line 450 is not UTF-8: the scan has submitted two shards by then, which are cancelled or discarded."""
    fast_model, long_input = dask_files
    lines = long_input.read_bytes().split(b"\n")
    lines[449] = b"Caf\xe9 here ."
    source = tmp_path / "input.txt"
    source.write_bytes(b"\n".join(lines))
    output = tmp_path / "shards"
    result = subprocess.run(dask_command(fast_model, source, output), capture_output=True, text=True, cwd=REPO,
                            timeout=WAIT_SECONDS)  # fmt: skip
    assert result.returncode == 1
    [line] = stderr_lines(result.stderr)
    assert line.startswith("python -m spacy_pairatt parse: error: line 450 is not UTF-8 text")
    assert line.endswith(f"(no shards written to {output})")
    assert list(output.iterdir()) == []


def test_a_task_still_running_after_the_run_writes_nothing(tmp_path):
    """What a late task does once its run has ended (staged_run's folder renamed away): its writes fail."""
    output = tmp_path / "shards"
    output.mkdir()
    with distributed.staged_run(output) as staging:
        late_shard = OutputTarget(str(staging / "shard-00000.conllu"))
    with pytest.raises(ParseCommandError, match="there is no folder"):
        with late_shard.open() as stream:
            stream.write("late\n")
    assert list(output.iterdir()) == []


def test_publishing_moves_all_shards_or_none(tmp_path):
    output, staging = tmp_path / "shards", tmp_path / "staging"
    output.mkdir()
    staging.mkdir()
    staged = [staging / f"shard-{i:05d}.conllu" for i in range(3)]
    for path in staged[:2]:
        path.write_text("done\n", encoding="utf8")
    with pytest.raises(FileNotFoundError):  # the third is missing: the two moved before it are removed
        distributed.publish(staged, output)
    assert list(output.iterdir()) == []
    for path in staged:
        path.write_text("done\n", encoding="utf8")
    assert [path.name for path in distributed.publish(staged, output)] == [path.name for path in staged]


def test_dask_logs_are_quiet_here_and_in_workers_unless_verbose(monkeypatch):
    monkeypatch.delenv(distributed.WORKER_LOG_LEVEL_VARIABLE, raising=False)
    logger = logging.getLogger("distributed")
    level = logger.level
    with distributed.dask_logs(verbose=False):
        assert logger.level == logging.CRITICAL
        assert os.environ[distributed.WORKER_LOG_LEVEL_VARIABLE] == "critical"
    assert logger.level == level and distributed.WORKER_LOG_LEVEL_VARIABLE not in os.environ
    with distributed.dask_logs(verbose=True):
        assert logger.level == level and distributed.WORKER_LOG_LEVEL_VARIABLE not in os.environ
