"""bench/lr_sweep.py: spaCy's evaluation rows read from a training log, and model-best as spaCy keeps it."""

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("lr_sweep", REPO / "bench" / "lr_sweep.py")
lr_sweep = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(lr_sweep)

HEADER = "E    #       LOSS TRANS...  LOSS PAIRA...  DEP_UAS  DEP_LAS  SENTS_F  SCORE \n---  ------  -------------\n"


def test_rows_and_model_best_from_a_real_training_log():
    log = (REPO / "results" / "gpu" / "lr_sweep" / "lr_3e-4.log").read_text(encoding="utf8")
    rows = lr_sweep.eval_rows(log, lr_sweep.score_columns(log))
    assert [row["step"] for row in rows] == list(range(0, 801, 200))
    assert all(0 <= row["dep_las"] <= row["dep_uas"] <= 100 for row in rows)
    (run,) = lr_sweep.table(["3e-4"], {"3e-4": log})
    assert run["best"]["dep_uas"] + run["best"]["dep_las"] == max(r["dep_uas"] + r["dep_las"] for r in rows)


def test_a_tie_in_the_rounded_score_goes_to_the_higher_uas_plus_las():
    log = HEADER + (
        "  3     600           0.94         132.71    87.86    83.93   100.00    0.86\n"
        "  4     800           0.30         107.65    88.35    84.57   100.00    0.86\n"
        "  5    1000           0.30         107.65    88.00    84.92   100.00    0.86\n"
    )
    (run,) = lr_sweep.table(["1e-4"], {"1e-4": log})
    assert run["best"]["step"] == 1000 and run["last"]["step"] == 1000
    assert run["best"]["dep_las"] == pytest.approx(84.92)


def test_a_log_cut_off_before_its_first_evaluation_is_named():
    with pytest.raises(SystemExit, match="no evaluation rows"):
        lr_sweep.eval_rows(HEADER, ["dep_uas", "dep_las", "sents_f"])


def test_a_log_without_parser_scores_is_refused_by_name():
    log = (
        "E    #       LOSS TRANS...  LOSS PAIRA...  REL_MICRO_F  SCORE \n  1     200     0.3     5.0     80.0    0.80\n"
    )
    assert lr_sweep.score_columns(log) == ["rel_micro_f"]
    with pytest.raises(SystemExit, match="no DEP_UAS and DEP_LAS"):
        lr_sweep.table(["1e-4"], {"1e-4": log})
