"""scripts/run_cost.py: the cost of a command, and with --pieces the whole cost of a resumable training
from the record of its calls."""

import json
import subprocess
import sys

from tests.conftest import REPO

RUN_COST = REPO / "scripts" / "run_cost.py"
PIECES = [
    {"from_step": 0, "to_step": 350, "wall_seconds": 5000.0, "cpu_seconds": 9000.0, "peak_rss_mb": 6100.0},
    {"from_step": 350, "to_step": 800, "wall_seconds": 6000.5, "cpu_seconds": 11000.0, "peak_rss_mb": 5900.0},
]


def run_cost(tmp_path, *options, code="import time; time.sleep(0.2)"):
    output = tmp_path / "cost.json"
    command = [sys.executable, str(RUN_COST), "--output", str(output), *options, "--", sys.executable, "-c", code]
    return subprocess.run(command, capture_output=True, text=True, cwd=tmp_path), output


def test_the_cost_of_a_resumable_run_sums_its_pieces_and_keeps_this_calls(tmp_path):
    (tmp_path / "pieces.json").write_text(json.dumps(PIECES))
    result, output = run_cost(tmp_path, "--pieces", str(tmp_path / "pieces.json"))
    assert result.returncode == 0, result.stderr
    cost = json.loads(output.read_text())
    assert cost["wall_seconds"] == 11000.5 and cost["cpu_seconds"] == 20000.0 and cost["peak_rss_mb"] == 6100.0
    assert cost["steps"] == [0, 800] and cost["pieces"] == PIECES
    assert 0 < cost["this_call"]["wall_seconds"] < 60 and cost["this_call"]["peak_rss_mb"] < 1000


def test_without_pieces_the_cost_is_the_commands_own(tmp_path):
    result, output = run_cost(tmp_path)
    cost = json.loads(output.read_text())
    assert result.returncode == 0 and "pieces" not in cost and 0 < cost["wall_seconds"] < 60


def test_a_missing_pieces_file_is_one_line_naming_it(tmp_path):
    result, output = run_cost(tmp_path, "--pieces", str(tmp_path / "absent.json"))
    assert result.returncode != 0 and not output.exists()
    assert result.stderr.strip().splitlines() == [
        f"run_cost: {tmp_path / 'absent.json'} not found: the command recorded no pieces (not train-resumable?)"
    ]


def test_a_resumable_runs_log_keeps_the_output_of_each_call_its_pieces_came_from(tmp_path):
    log, pieces = tmp_path / "train.log", tmp_path / "pieces.json"
    log.write_text("an earlier run's output\n")
    options = ("--pieces", str(pieces), "--log", str(log))
    pieces.write_text(json.dumps(PIECES[:1]))
    run_cost(tmp_path, *options, code="print('steps 0 to 350')")
    first = log.read_text()
    assert "earlier run" not in first and first.count("steps 0 to 350") == 1
    pieces.write_text(json.dumps(PIECES))
    result, _ = run_cost(tmp_path, *options, code="print('steps 350 to 800')")
    assert result.returncode == 0, result.stderr
    assert log.read_text().startswith(first) and log.read_text().count("steps 350 to 800") == 1
    assert log.read_text().count("run_cost: a call began at ") == 2
