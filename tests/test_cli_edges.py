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
