"""train-resumable's command line: spaCy's config overrides pass through to it alone."""

import pytest

from spacy_pairatt.cli import main
from tests.conftest import REPO


def test_an_unknown_option_is_still_refused_by_other_commands(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["fetch-mpnet", "assets/mpnet", "--training.max_steps", "10"])
    assert stopped.value.code == 2 and "unrecognized arguments: --training.max_steps 10" in capsys.readouterr().err


def test_bad_checkpoint_settings_are_one_line_errors(tmp_path):
    config = str(REPO / "configs" / "parser_minilm.cfg")
    with pytest.raises(SystemExit, match=r"^python -m spacy_pairatt train-resumable: error: --checkpoint-every must"):
        main(["train-resumable", config, "--output", str(tmp_path), "--checkpoint-every", "0", "--training.seed", "1"])
    assert not any(tmp_path.iterdir())  # nothing written


def test_an_output_with_models_but_no_checkpoint_is_refused_in_one_line(tmp_path):
    """The issue's case: `checkpoints/` deleted to save disk, a rerun trained from step 0 and deleted
    model-best and model-last. Nothing is read or deleted; the line says how to start over."""
    config = str(REPO / "configs" / "parser_minilm.cfg")
    (tmp_path / "model-last").mkdir()
    (tmp_path / "model-last" / "meta.json").write_text("{}")
    with pytest.raises(SystemExit) as stopped:
        main(["train-resumable", config, "--output", str(tmp_path), "--checkpoint-every", "5"])
    assert stopped.value.code == (
        f"python -m spacy_pairatt train-resumable: error: {tmp_path} holds a training (model-last) but no "
        "checkpoint to resume from: add --restart to start over (it deletes them), or train into a new --output"
    )
    assert (tmp_path / "model-last" / "meta.json").read_text() == "{}"
