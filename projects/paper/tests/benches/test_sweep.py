"""bench/sweep.py: spaCy's evaluation rows read from a training log, and model-best as spaCy keeps it."""

import importlib.util
from pathlib import Path

import pytest

from tests.conftest import PAPER

SPEC = importlib.util.spec_from_file_location("sweep", PAPER / "bench" / "sweep.py")
sweep = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(sweep)

WIDTHS = [
    "components.pairatt_parser.model.pair_scorer.label_width",
    "components.pairatt_parser.model.pair_scorer.arc_width",
]
HEADER = "E    #       LOSS TRANS...  LOSS PAIRA...  DEP_UAS  DEP_LAS  SENTS_F  SCORE \n---  ------  -------------\n"


def test_rows_and_model_best_from_a_real_training_log():
    log = (PAPER / "results" / "gpu" / "lr_sweep" / "lr_3e-4.log").read_text(encoding="utf8")
    rows = sweep.eval_rows(log, sweep.score_columns(log))
    assert [row["step"] for row in rows] == list(range(0, 801, 200))
    assert all(0 <= row["dep_las"] <= row["dep_uas"] <= 100 for row in rows)
    (run,) = sweep.table(["3e-4"], {"3e-4": log})
    assert run["best"]["dep_uas"] + run["best"]["dep_las"] == max(r["dep_uas"] + r["dep_las"] for r in rows)


def test_a_tie_in_the_rounded_score_goes_to_the_higher_uas_plus_las():
    log = HEADER + (
        "  3     600           0.94         132.71    87.86    83.93   100.00    0.86\n"
        "  4     800           0.30         107.65    88.35    84.57   100.00    0.86\n"
        "  5    1000           0.30         107.65    88.00    84.92   100.00    0.86\n"
    )
    (run,) = sweep.table(["1e-4"], {"1e-4": log})
    assert run["best"]["step"] == 1000 and run["last"]["step"] == 1000
    assert run["best"]["dep_las"] == pytest.approx(84.92)


def test_a_log_cut_off_before_its_first_evaluation_is_named():
    with pytest.raises(SystemExit, match="no evaluation rows"):
        sweep.eval_rows(HEADER, ["dep_uas", "dep_las", "sents_f"])


def test_a_log_without_parser_scores_is_refused_by_name():
    log = (
        "E    #       LOSS TRANS...  LOSS PAIRA...  REL_MICRO_F  SCORE \n  1     200     0.3     5.0     80.0    0.80\n"
    )
    assert sweep.score_columns(log) == ["rel_micro_f"]
    with pytest.raises(SystemExit, match="no DEP_UAS and DEP_LAS"):
        sweep.table(["1e-4"], {"1e-4": log})


def test_each_value_trains_the_config_with_the_setting_overridden_and_its_own_name():
    rate = sweep.train_command("configs/parser_minilm.cfg", [sweep.LEARN_RATE], "3e-4", Path("out/lr_3e-4"), -1)
    assert rate[-2:] == ["--training.optimizer.learn_rate.initial_rate", "3e-4"]
    width = "components.pairatt_parser.model.pair_scorer.label_width"
    assert sweep.train_command("configs/parser_minilm.cfg", [width], "64", Path("out"), 0)[-2:] == [f"--{width}", "64"]
    assert [sweep.run_name([sweep.LEARN_RATE], "3e-4"), sweep.run_name([width], "64")] == ["lr_3e-4", "label_width_64"]


def test_a_value_over_several_settings_overrides_each_and_names_the_run_by_all():
    settings = WIDTHS
    command = sweep.train_command("configs/parser_minilm.cfg", settings, "64,128", Path("out"), 0)
    assert command[-4:] == [f"--{settings[0]}", "64", f"--{settings[1]}", "128"]
    assert sweep.log_name(settings, "64,128") == "label_width_64_arc_width_128.log"


def test_a_value_with_the_wrong_number_of_parts_is_refused_before_any_training(tmp_path):
    settings = WIDTHS
    with pytest.raises(SystemExit, match="has 1 comma-joined parts for 2 settings"):
        sweep.main(["--setting", *settings, "--values", "64,128", "64", "--output-dir", str(tmp_path / "runs"),
                    "--results", str(tmp_path / "sweep")])  # fmt: skip
    assert not (tmp_path / "runs").exists() and not (tmp_path / "sweep").exists()
