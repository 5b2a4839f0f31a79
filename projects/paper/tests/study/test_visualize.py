"""Pictures: attention maps (Fig. 3 and 4), training curves, displaCy; on the tiny random BERT."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from pairatt_paper.cli import main
from pairatt_paper.visualize import (
    CURVES_SIZE,
    DPI,
    MapSpec,
    arc_boxes,
    attention_figure_size,
    attention_maps_figure,
    attention_picture,
    displacy_markup,
    entity_boxes,
    full_column_name,
    maps_from_probe,
    parse_map_specs,
    parse_training_log,
    plot_training_curves,
    relation_picture,
    report_picture,
    training_curves_figure,
)
from tests.conftest import REPO, UD_DIR, examples_from_docs, make_pipeline

pytest.importorskip("matplotlib")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
DEV = UD_DIR / "en_ewt-ud-dev.conllu"
TRAIN_LOG = REPO / "results" / "train_pairatt.log"
TAGGED = "The <e1>author</e1> of a keygen uses a <e2>disassembler</e2> to look at the raw assembly code."


def assert_png(path: Path, size_inches):
    """A real PNG that matplotlib reads back at size_inches x DPI pixels, and not one flat colour."""
    from matplotlib.image import imread

    assert Path(path).read_bytes()[:8] == PNG_SIGNATURE
    image = imread(path)
    width, height = size_inches
    assert image.shape[:2] == (round(height * DPI), round(width * DPI))
    assert image[..., :3].std() > 0.01


def test_map_specs_parse_and_reject_bad_input():
    assert parse_map_specs("3:5,2:1:a_ji") == [MapSpec(3, 5, "a_ij"), MapSpec(2, 1, "a_ji")]
    with pytest.raises(ValueError, match="LAYER:HEAD"):
        parse_map_specs("3-5")


def test_maps_from_probe_take_distinct_heads_in_importance_order(tmp_path):
    top = [("a_ji", 3, 5), ("a_ij", 3, 5), ("a_ij", 2, 1), ("a_ij", 1, 1)]
    result = {"probes": {"both": {"importance": {"top_attention": [
        {"part": part, "layer": layer, "head": head} for part, layer, head in top
    ]}}}}  # fmt: skip
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(result))
    assert maps_from_probe(path) == [MapSpec(3, 5, "a_ji"), MapSpec(2, 1, "a_ij")]
    with pytest.raises(ValueError, match="5 wanted"):
        maps_from_probe(path, 5)


def test_map_titles_say_the_direction_and_colorbars_what_they_measure():
    arcs_ij, arcs_ji = MapSpec(3, 2).arcs_title, MapSpec(4, 9, "a_ji").arcs_title
    assert arcs_ij == "layer 3, head 2: a_ij (dependent->head)\ngold arcs boxed at (row dependent, column head)"
    assert arcs_ji == "layer 4, head 9: a_ji (head->dependent)\ngold arcs boxed at (row head, column dependent)"
    assert MapSpec(4, 9, "a_ji").relation_title == "layer 4, head 9: the probe's a_ji (head->dependent)"
    words = ["Dogs", "bark", "."]
    matrices = np.full((2, 3, 3), 1 / 3)
    figure = attention_maps_figure(words, matrices, ["first", "second"], [np.zeros((0, 4))] * 2, [0], "caption")
    maps = [axis for axis in figure.axes if axis.get_title()]
    assert [axis.get_title() for axis in maps] == ["first", "second"]
    colorbars = [axis for axis in figure.axes if not axis.get_title()]
    assert [axis.get_ylabel() for axis in colorbars] == ["attention weight (row word attending to column word)"] * 2


def test_arc_boxes_follow_the_direction():
    heads = np.array([2, 0, 2])  # word 1 -> word 2, word 2 -> root, word 3 -> word 2
    assert arc_boxes(heads, "a_ij").tolist() == [[0, 1, 1, 2], [2, 3, 1, 2]]
    assert arc_boxes(heads, "a_ji").tolist() == [[1, 2, 0, 1], [1, 2, 2, 3]]
    assert entity_boxes((1, 2), (7, 9)).tolist() == [[1, 2, 7, 9], [7, 9, 1, 2]]


def test_attention_picture_of_a_dev_sentence(tiny_bert_dir, tmp_path):
    if not DEV.exists():
        pytest.skip(f"UD English-EWT dev not found at {DEV}")
    output = attention_picture(DEV, 1, [MapSpec(2, 3), MapSpec(1, 1, "a_ji")], tmp_path / "maps.png", tiny_bert_dir)
    # dev sentence 2: "I will be going to the Dentist Saturday, so ..."
    from pairatt_paper.probing import read_conllu_docs

    n_words = len(read_conllu_docs(DEV, 2)[1])
    assert_png(output, attention_figure_size(n_words, 2))


def test_maps_outside_the_encoder_are_named(tiny_bert_dir, tmp_path):
    if not DEV.exists():
        pytest.skip(f"UD English-EWT dev not found at {DEV}")
    with pytest.raises(ValueError, match="L3H1 is outside the encoder's 2 layers x 4 heads"):
        attention_picture(DEV, 0, [MapSpec(3, 1)], tmp_path / "maps.png", tiny_bert_dir)


def test_relation_picture_marks_entities(tiny_bert_dir, tmp_path):
    output = relation_picture(TAGGED, [MapSpec(1, 2), MapSpec(2, 4)], tmp_path / "relation.png", tiny_bert_dir)
    n_words = 16  # The author of a keygen uses a disassembler to look at the raw assembly code .
    assert_png(output, attention_figure_size(n_words, 2))


def test_training_log_table_is_parsed():
    table = parse_training_log(TRAIN_LOG.read_text(encoding="utf8"))
    # spaCy cuts the loss columns to 'LOSS TRANS...' and 'LOSS PAIRA...'; the log's pipeline line names them
    names = ["E", "#", "LOSS transformer", "LOSS pairatt_parser", "DEP_UAS", "DEP_LAS", "SENTS_F", "SCORE"]
    assert list(table) == names
    assert table["#"].tolist() == [0, 200, 400, 600, 800]
    rows = [
        line.split() for line in TRAIN_LOG.read_text(encoding="utf8").splitlines() if re.match(r"\s*\d+\s+\d+\s", line)
    ]
    assert table["DEP_UAS"][-1] == pytest.approx(float(rows[-1][4]))
    assert table["LOSS pairatt_parser"][1] == pytest.approx(float(rows[1][3]))


def test_cut_loss_names_are_completed_only_when_one_component_fits():
    pipeline = ["transformer", "tagger", "tok2vec", "trainable_lemmatizer"]
    assert full_column_name("LOSS TAGGER", pipeline) == "LOSS TAGGER"
    assert full_column_name("LOSS TRANS...", pipeline) == "LOSS transformer"
    assert full_column_name("LOSS T...", pipeline) == "LOSS T..."  # four fit: left as the log has it
    assert full_column_name("LOSS TRANS...", []) == "LOSS TRANS..."
    assert full_column_name("DEP_UAS", pipeline) == "DEP_UAS"


def test_curve_legends_are_whole_names_inside_the_figure():
    figure = training_curves_figure(parse_training_log(TRAIN_LOG.read_text(encoding="utf8")), "train_pairatt.log")
    legends = [[text.get_text() for text in axis.get_legend().get_texts()] for axis in figure.axes]
    assert legends == [["transformer loss", "pairatt_parser loss"], ["UAS", "LAS", "sentence F"]]
    figure.canvas.draw()
    whole = figure.bbox
    for axis in figure.axes:
        box = axis.get_legend().get_window_extent()
        assert whole.x0 <= box.x0 and box.x1 <= whole.x1 and whole.y0 <= box.y0 and box.y1 <= whole.y1


def test_training_log_without_a_table_is_refused():
    with pytest.raises(ValueError, match="No `spacy train` results table"):
        parse_training_log("✔ Created output directory\nE  #\n")


def test_training_curves_png_from_the_cli(tmp_path, capsys):
    output = tmp_path / "curves.png"
    main(["visualize", "curves", str(TRAIN_LOG), "--output", str(output)])
    assert_png(output, CURVES_SIZE)
    direct = plot_training_curves(parse_training_log(TRAIN_LOG.read_text(encoding="utf8")), tmp_path / "direct.png")
    assert_png(direct, CURVES_SIZE)


def test_report_block_gets_the_picture(tmp_path):
    report = tmp_path / "results" / "probe.md"
    report.parent.mkdir()
    report.write_text("# Probe\n<!-- attention-maps:start -->\nNot drawn yet\n<!-- attention-maps:end -->\nend\n")
    report_picture(report, "attention-maps", tmp_path / "results" / "maps.png", "Two maps", "python -m x")
    text = report.read_text()
    assert "Not drawn yet" not in text
    assert "![Two maps](maps.png)" in text and "python -m x" in text and text.endswith("end\n")


@pytest.fixture(scope="module")
def parser_nlp(tiny_bert_dir, ud_train_docs):
    nlp = make_pipeline(tiny_bert_dir)
    examples = examples_from_docs(nlp, ud_train_docs[:5])
    nlp.initialize(lambda: examples)
    return nlp


def test_displacy_parse_contains_the_words(parser_nlp, tmp_path):
    html = displacy_markup(parser_nlp, ["Dogs bark loudly.", "The cat sat on the mat."])
    assert html.startswith("<!DOCTYPE html>")
    for word in ("Dogs", "bark", "loudly", "cat", "mat"):
        assert f">{word}" in html  # a word's tspan; displaCy joins trailing punctuation to it ("loudly.")
    svg = displacy_markup(parser_nlp, ["Dogs bark loudly."], page=False)
    assert svg.lstrip().startswith("<svg") and ">bark</tspan>" in svg
    with pytest.raises(ValueError, match="An SVG holds one parse"):
        displacy_markup(parser_nlp, ["One.", "Two."], page=False)
    # from the command line, on the saved pipeline (a sentencizer is put in front of it)
    parser_nlp.to_disk(tmp_path / "pipeline")
    output = tmp_path / "parse.svg"
    main(["visualize", "parse", "--model", str(tmp_path / "pipeline"), "--text", "Cats purr.", "--output", str(output)])
    assert ">Cats" in output.read_text(encoding="utf8")


@pytest.mark.parametrize(
    "argv,message",
    [
        (["visualize", "parse", "--model", "{dir}/missing", "--text", "a", "--output", "{dir}/x.html"],
         "visualize parse: error: .*Can't find model"),
        (["visualize", "curves", "{dir}/missing.log", "--output", "{dir}/x.png"],
         "visualize curves: error: .*missing.log"),
        (["probe", "{dir}/missing.conllu", "{dir}/missing.conllu"], "probe: error: .*missing.conllu"),
    ],
)  # fmt: skip
def test_a_missing_file_or_model_is_a_one_line_error(argv, message, tmp_path):
    """The study's commands fail as the library's do (the reliability fuzz covers those): one line naming it."""
    with pytest.raises(SystemExit, match=message) as error:
        main([arg.format(dir=tmp_path) for arg in argv])
    assert isinstance(error.value.code, str) and "\n" not in error.value.code
    assert not (tmp_path / "x.html").exists() and not (tmp_path / "x.png").exists()
