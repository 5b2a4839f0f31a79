"""`parse` under stop signals: SIGINT, SIGTERM and SIGHUP run the same cleanup (one line, exit 1, no
partial file, an earlier output kept, no worker left running); a parent killed outright takes its
workers with it, and the next run removes the partial file it left; an output that is the input is
refused.

The command reads stdin, held open by the test, so the signal comes while it waits for documents,
with its partial output open and (with --n-process 2) both workers started.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spacy_pairatt.cli import main
from spacy_pairatt.runs.scratch import process_alive
from tests.conftest import REPO
from tests.parse_files.test_parse_faults import fast_model  # noqa: F401 (a fixture)

WAIT_SECONDS = 120  # for the command to start on a loaded machine: a hang guard, not a timing
EARLIER = "an earlier output\n"


def children(pid: int):
    """The processes whose parent is `pid`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def wait_for(condition, what, process):
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert process.poll() is None, f"the command ended before {what}: {process.stderr.read()}"
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def start_parse(model, output: Path, n_process: int):
    """The command on stdin, after a few documents, waiting for more; its worker process ids."""
    command = [sys.executable, "-m", "spacy_pairatt", "parse", model, "-", "--output", str(output),
               "--batch-size", "1", "--n-process", str(n_process), "--no-progress"]  # fmt: skip
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, start_new_session=True
    )
    process.stdin.write("".join(f"Line {i} is a short sentence .\n" for i in range(8)))
    process.stdin.flush()
    wait_for(lambda: partial_files(output), "the partial output", process)
    if n_process > 1:
        wait_for(lambda: len(children(process.pid)) == n_process, "the workers", process)
    return process, children(process.pid)


def partial_files(output: Path):
    return sorted(path.name for path in output.parent.glob(f".{output.name}.partial-*"))


def wait_gone(pids):
    deadline = time.monotonic() + 10  # a worker whose parent is gone is ended and reaped at once
    while [pid for pid in pids if process_alive(pid)] and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if process_alive(pid)]


@pytest.fixture(scope="module", autouse=True)
def on_linux():
    if not sys.platform.startswith("linux"):
        pytest.skip("reads /proc for the worker processes")


@pytest.mark.parametrize("n_process", [1, 2])
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_each_stop_signal_cleans_up_the_same_way(fast_model, tmp_path, n_process, stop):  # noqa: F811
    output = tmp_path / "out.conllu"
    output.write_text(EARLIER)
    process, workers = start_parse(fast_model, output, n_process)
    os.killpg(process.pid, stop)  # as a terminal sends it: to every process of the command
    _, stderr = process.communicate(timeout=WAIT_SECONDS)
    assert process.returncode == 1
    assert stderr.strip().splitlines() == ["python -m spacy_pairatt parse: interrupted"]
    assert output.read_text() == EARLIER and partial_files(output) == []
    assert wait_gone(workers) == []


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_to_the_command_alone_ends_its_workers(fast_model, tmp_path, stop):  # noqa: F811
    """The issue's case: `kill PID` left both workers running, reparented to init."""
    output = tmp_path / "out.conllu"
    process, workers = start_parse(fast_model, output, 2)
    process.send_signal(stop)
    _, stderr = process.communicate(timeout=WAIT_SECONDS)
    assert process.returncode == 1 and stderr.strip().endswith("interrupted")
    assert wait_gone(workers) == [] and not output.exists() and partial_files(output) == []


def test_workers_die_with_a_killed_parent_and_the_next_run_removes_its_partial_file(fast_model, tmp_path):  # noqa: F811
    output = tmp_path / "out.conllu"
    output.write_text(EARLIER)
    process, workers = start_parse(fast_model, output, 2)
    left = partial_files(output)
    process.kill()
    process.communicate(timeout=WAIT_SECONDS)
    assert wait_gone(workers) == []
    assert output.read_text() == EARLIER and partial_files(output) == left != []
    source = tmp_path / "in.txt"
    source.write_text("One more line .\n")
    rerun = subprocess.run(
        [sys.executable, "-m", "spacy_pairatt", "parse", fast_model, source, "--output", output, "--no-progress"],
        capture_output=True, text=True, cwd=REPO, timeout=WAIT_SECONDS,
    )  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert partial_files(output) == [] and "# text = One" in output.read_text()


@pytest.mark.parametrize("command", ["parse", "review"])
def test_an_output_that_is_the_input_is_refused(fast_model, tmp_path, monkeypatch, command):  # noqa: F811
    source = tmp_path / "in.txt"
    source.write_text("A sentence .\n")
    (tmp_path / "link.txt").symlink_to(source)
    monkeypatch.chdir(tmp_path)
    for output in ("in.txt", "./in.txt", str(source), "link.txt", "../" + tmp_path.name + "/in.txt"):
        with pytest.raises(SystemExit) as exit:
            main([command, fast_model, "in.txt", "--output", output])
        assert exit.value.code == (
            f"python -m spacy_pairatt {command}: error: the output {output} is the input in.txt: "
            "choose another output file"
        )
    with source.open() as stdin:  # `parse M - --output in.txt < in.txt`
        monkeypatch.setattr(sys, "stdin", stdin)
        for output in ("in.txt", "link.txt"):
            with pytest.raises(SystemExit) as exit:
                main([command, fast_model, "-", "--output", output])
            assert exit.value.code == (
                f"python -m spacy_pairatt {command}: error: the output {output} is the input (stdin): "
                "choose another output file"
            )
    assert source.read_text() == "A sentence .\n"
