"""bench/footprint.py: results/footprint.json, the disk of the installed stack, the data and the trained model,
which the docs' `requirements` block reads."""

import importlib.util
import json

from tests.conftest import PAPER

SPEC = importlib.util.spec_from_file_location("footprint", PAPER / "bench" / "footprint.py")
footprint = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(footprint)


def test_the_footprint_sums_each_folder_there_and_the_stack_spacy_pairatt_needs(tmp_path):
    (tmp_path / "assets" / "ud").mkdir(parents=True)
    (tmp_path / "assets" / "ud" / "a.conllu").write_bytes(b"x" * 1000)
    (tmp_path / "assets" / "b.txt").write_bytes(b"y" * 24)
    output = tmp_path / "results" / "footprint.json"

    footprint.main(["--root", str(tmp_path), "--output", str(output)])

    written = json.loads(output.read_text(encoding="utf8"))
    assert written["folder_bytes"] == {"assets": 1024}  # corpus/ and the model are not there: left out
    assert {"spacy", "spacy-transformers", "torch"} <= set(written["stack"]) and written["stack_bytes"] > 10**8
    assert written["provenance"]["created"]
