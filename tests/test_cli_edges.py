"""Issue 47, item 6: the command line's small edges, each a one-line error or the expected behaviour."""

import os
import subprocess
import sys

from test_parse_faults import REPO, fast_model  # noqa: F401 (fast_model: its fixture, shared)


def test_parse_into_a_reader_that_stops_early_exits_quietly(fast_model, tmp_path):  # noqa: F811
    """`parse ... | head -2`: the reader has what it wanted; no "Broken pipe", status 0."""
    source = tmp_path / "input.txt"
    source.write_text("".join(f"Line {i} is a sentence .\n" for i in range(3000)), encoding="utf8")
    command = f'"{sys.executable}" -m spacy_pairatt parse "{fast_model}" "{source}" --no-progress | head -2'
    for n_process in ("1", "2"):
        result = subprocess.run(
            ["bash", "-c", f"{command.replace('--no-progress', '--no-progress --n-process ' + n_process)}; "
             'echo "status ${PIPESTATUS[0]}" >&2'],
            capture_output=True, text=True, timeout=120, cwd=REPO, env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )  # fmt: skip
        assert len(result.stdout.splitlines()) == 2
        assert result.stderr.strip() == "status 0", result.stderr


def test_worker_processes_are_bounded_by_the_cpus_and_the_batches(fast_model, monkeypatch):  # noqa: F811
    """--n-process 99999 starts no more workers than the CPUs, and two lines (one batch) start one."""
    import io
    import multiprocessing

    from test_parse_faults import assert_no_workers_left

    from spacy_pairatt.parse_files import parsing
    from spacy_pairatt.parse_files.reading import read_documents

    nlp = parsing.load_pipeline(fast_model)

    def most_workers(text: str, batch_size: int) -> int:
        sources = read_documents(io.BytesIO(text.encode()), "text")
        most = 0
        for _ in parsing.parse_docs(nlp, sources, batch_size=batch_size, n_process=99999):
            most = max(most, len(multiprocessing.active_children()))
        assert_no_workers_left()
        return most

    assert most_workers("One line .\nTwo lines .\n", 64) == 1
    monkeypatch.setattr(parsing, "usable_cpus", lambda: 3)
    assert most_workers("".join(f"Line {i} .\n" for i in range(40)), 2) == 3


def test_a_batch_size_too_large_for_python_is_one_line(fast_model, tmp_path, capsys):  # noqa: F811
    """Beyond what islice and deque take: argparse's one line (status 2), and parse_file's error."""
    import pytest

    from spacy_pairatt.cli import main
    from spacy_pairatt.parse_files.errors import ParseCommandError
    from spacy_pairatt.parse_files.parsing import parse_file

    source = tmp_path / "input.txt"
    source.write_text("One line .\n", encoding="utf8")
    with pytest.raises(SystemExit) as error:
        main(["parse", fast_model, str(source), "--batch-size", "99999999999999999999"])
    assert error.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        "argument --batch-size: 99999999999999999999 is too large (at most 9223372036854775807)"
    )
    with pytest.raises(ParseCommandError, match="the batch size must be at most 9223372036854775807, got 1"):
        parse_file(fast_model, str(source), batch_size=10**19)
