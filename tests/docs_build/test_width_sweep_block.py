"""docs/performance.md's `width-sweep` block: every value's dev scores and each narrower pair's difference
from the config's own widths, computed from results/gpu/width_sweep.json."""

import json

from spacy.util import load_config

from docs_build.plan import BLOCKS
from docs_build.results import Results
from tests.conftest import REPO

width_sweep_block = BLOCKS["width-sweep"]  # the figures, then their source note
WIDTH_SWEEP_FILE = width_sweep_block.path("sweep")


def copy_checkout_parts(root, record):
    (root / "configs").mkdir()  # the config's own widths
    (root / "configs" / "parser_minilm.cfg").write_text((REPO / "configs" / "parser_minilm.cfg").read_text("utf8"))
    (root / WIDTH_SWEEP_FILE).parent.mkdir(parents=True, exist_ok=True)
    (root / WIDTH_SWEEP_FILE).write_text(json.dumps(record), encoding="utf8")


def sweep_record(uas_las_by_value):
    runs = []
    for value, (uas, las) in uas_las_by_value.items():
        rows = [{"step": 0, "dep_uas": 9.0, "dep_las": 2.0, "score": 0.06}]
        rows.append({"step": 800, "dep_uas": uas, "dep_las": las, "score": 0.88})
        runs.append({"value": value, "rows": rows, "best": rows[-1], "last": rows[-1]})
    prefix = "components.pairatt_parser.model.scorer."
    return {
        "config": "configs/parser_minilm.cfg",
        "settings": [prefix + "label_width", prefix + "arc_width"],
        "values": list(uas_las_by_value),
        "runs": runs,
        "device": "a test GPU",
        "commands": {value: f"python -m spacy train ... {value}" for value in uas_las_by_value},
        "provenance": {"seed": 0, "created": "2026-11-27T00:00:00+00:00", "code": {"commit": "0" * 40}},
    }


def test_each_narrower_pair_is_set_against_the_configs_own_widths(tmp_path):
    scorer = load_config(REPO / "configs" / "parser_minilm.cfg")["components"]["pairatt_parser"]["model"]["pair_scorer"]
    own = f"{scorer['label_width']},{scorer['arc_width']}"
    copy_checkout_parts(tmp_path, sweep_record({own: (90.12, 86.93), "16,32": (89.96, 86.54)}))

    block = width_sweep_block(Results(tmp_path))

    assert f"| {own} (best on dev) | 86.93 | 90.12 | 86.93 |" in block
    assert f"16,32 against the config's {own}, model-best on dev (one seed): UAS -0.16, LAS -0.39." in block
    assert "Device: a test GPU." in block
    assert block.rstrip().endswith("(provenance recorded).*")


def test_without_the_configs_own_widths_nothing_is_compared(tmp_path):
    copy_checkout_parts(tmp_path, sweep_record({"64,128": (89.96, 86.54), "32,128": (89.0, 85.0)}))

    block = width_sweep_block(Results(tmp_path))

    assert "| 64,128 (best on dev) |" in block and "against the config's" not in block


def test_without_the_file_the_block_says_not_measured_yet(tmp_path):
    assert width_sweep_block(Results(tmp_path)).startswith(f"*not measured yet: `{WIDTH_SWEEP_FILE}`")
