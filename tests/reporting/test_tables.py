"""Result tables and the README block they are written into."""

import pytest

from spacy_pairatt.reporting.tables import replace_marked_block, results_table


def test_results_table_formats_percentages_and_missing_values():
    result = {
        "scores": {
            "dep_uas": 0.8612,
            "dep_las": 0.8,
            "dep_uas_punct": 0.85,
            "dep_las_punct": 0.79,
            "dep_single_tree": 1.0,
            "sents_f": None,
        },
        "words_per_second": 1234.4,
    }
    table = results_table([{"name": "pairatt", "split": "dev", "result": result}])
    assert table.splitlines()[-1] == "| pairatt | dev | 86.1 | 80.0 | 85.0 | 79.0 | 100.0 | – | 1234 |"


def test_replace_marked_block_keeps_the_rest():
    text = "intro\n<!-- results:start -->\nold table\n<!-- results:end -->\noutro\n"
    assert replace_marked_block(text, "results", "| new |\n") == (
        "intro\n<!-- results:start -->\n| new |\n<!-- results:end -->\noutro\n"
    )
    with pytest.raises(ValueError, match="block"):
        replace_marked_block("no markers", "results", "x")
