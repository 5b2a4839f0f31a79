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
