"""bench/table.py's speed sections: the thread-scaling table bench/speed.py records on a CPU, and the whole UD
pipelines bench/ud_pipeline_speed.py times."""

import json

import pytest

from bench.table import b_over_a_row, speed_lines, thread_lines, ud_pipeline_speed_lines
from tests.conftest import REPO

SPEED = REPO / "results" / "bench_speed.json"


def test_the_thread_table_gives_each_count_its_median_seconds_and_ratio():
    threads = {
        "1": {"transformer": [15.0, 14.0, 16.0], "parser": [2.0, 1.9, 2.1], "ratio_b_over_a": 0.882},
        "2": {"transformer": [9.0, 8.5, 9.5], "parser": [1.5, 1.4, 1.6], "ratio_b_over_a": 0.857},
    }
    lines = thread_lines(threads)
    assert "| 1 | 15.00 | 2.00 | 0.882 |" in lines and "| 2 | 9.00 | 1.50 | 0.857 |" in lines
    assert thread_lines(None) == [] and thread_lines({}) == []


def test_the_b_over_a_target_is_met_only_when_the_times_taken_apart_agree():
    """A noisy machine can lift the pipelines' medians over 0.90 while the transformer's and the parser's own times
    on the same batches say otherwise: the row shows both and the lower one decides."""
    inference = {"ratio_b_over_a": 0.902, "paired_ratios_over_a": {"b_pairatt": [0.87, 0.93, 1.06]}}
    row = b_over_a_row(inference, (8.68, 1.41, 0.861))
    assert "0.902 (pipelines; paired repeats 0.87 to 1.06); 0.861 timed apart" in row and row.endswith("**not met** |")
    assert b_over_a_row(inference, (8.68, 0.91, 0.905)).endswith("| met |")
    row = b_over_a_row({"ratio_b_over_a": 0.88}, None)
    assert row == "| b/a ≥ 0.90 (confidence arcs, the default) | 0.880 | **not met** |"


def test_the_published_speed_section_shows_the_threads_when_measured():
    if not SPEED.exists():
        pytest.skip("no bench-speed results in this checkout")
    speed = json.loads(SPEED.read_text(encoding="utf8"))
    lines = speed_lines(speed)
    if "threads" not in speed:
        assert not any(line.startswith("| torch threads |") for line in lines)
        return
    for count, run in speed["threads"].items():
        assert any(
            line.startswith(f"| {count} |") and line.endswith(f"| {run['ratio_b_over_a']:.3f} |") for line in lines
        )


def test_the_ud_pipeline_speed_section_judges_the_judged_pipelines_by_both_ratios():
    """Issue 54's bar: a new segmenter may cost the whole pipeline at most 5% of its words/s, met only
    where the ratio of the medians and the median paired ratio both reach 0.95."""
    speed = {
        "pipelines": {"old": "a", "new": "b", "slow": "c"}, "paragraphs": 854, "words": 25094, "batch_size": 64,
        "torch_threads": 2, "seconds": {"old": [15.3, 15.6], "new": [16.0, 16.2], "slow": [21.0, 21.5]},
        "words_per_second": {"old": 1643.0, "new": 1580.0, "slow": 1200.0},
        "ratio_to_reference": {"old": 1.0, "new": 0.962, "slow": 0.73},
        "paired_ratios": {"old": [1.0, 1.0], "new": [0.956, 0.963], "slow": [0.729, 0.726]},
        "median_paired_ratio": {"old": 1.0, "new": 0.96, "slow": 0.727}, "judged": ["new"],
    }  # fmt: skip
    lines = ud_pipeline_speed_lines(speed)
    assert "| new | `b` | 1,580 | 16.0, 16.2 | 0.962 | 0.960; 0.956 to 0.963 |" in lines
    assert "| slow | `c` | 1,200 | 21.0, 21.5 | 0.730 | 0.727; 0.726 to 0.729 |" in lines  # shown, not judged
    assert lines[-1].endswith("(the lower: 0.960), met.")
    speed["median_paired_ratio"]["new"] = 0.937  # the medians' ratio alone would pass
    assert ud_pipeline_speed_lines(speed)[-1].endswith("(the lower: 0.937), **not met**.")
    speed["judged"] = ["new", "slow"]
    assert ud_pipeline_speed_lines(speed)[-1].endswith("(the lower: 0.727), **not met**.")
