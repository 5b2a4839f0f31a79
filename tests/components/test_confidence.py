"""The parser's confidence on the Doc: values, settings, every serialization path, CLI and displaCy."""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc, DocBin
from thinc.api import Adam, fix_random_seed

from bench.reliability import file_size_limit
from spacy_pairatt import render_parse
from tests.conftest import REPO, UD_DIR, examples_from_docs, make_pipeline, write_first_sentences

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "",
    "I saw her yesterday at the station near the old bridge.",
    "Short one",
]


@pytest.fixture(scope="module")
def initialized(tiny_bert_dir, ud_train_docs):
    """An initialized (untrained) parser pipeline and its examples."""
    fix_random_seed(0)
    nlp = make_pipeline(tiny_bert_dir)
    examples = examples_from_docs(nlp, ud_train_docs[:20])
    nlp.initialize(lambda: examples)
    return nlp, examples


def confidence_values(doc):
    return [(t._.head_prob, t._.dep_prob, t._.head_candidates) for t in doc], [s._.parse_confidence for s in doc.sents]


def test_every_parsed_token_has_its_confidence(initialized):
    nlp, _ = initialized
    docs = list(nlp.pipe(TEXTS, batch_size=3))
    assert docs[1]._.pairatt_confidence is None  # the empty text is passed through
    for doc in docs:
        for token in doc:
            assert 0 < token._.head_prob <= 1 and 0 < token._.dep_prob <= 1
            candidates = token._.head_candidates
            assert len(candidates) == min(3, len(doc))
            probs = [prob for _, prob in candidates]
            assert probs == sorted(probs, reverse=True) and all(0 <= p <= 1 for p in probs)
            heads = [head for head, _ in candidates]
            assert len(set(heads)) == len(heads) and all(0 <= head < len(doc) for head in heads)
            if token.head.i in heads:  # the chosen head's listed probability is head_prob
                assert dict(candidates)[token.head.i] == pytest.approx(token._.head_prob, rel=1e-5)
        for sent in doc.sents:  # P(tree and labels) is at most the probability of any one of its arcs and labels
            assert 0 < sent._.parse_confidence <= min(t._.head_prob * t._.dep_prob for t in sent) + 1e-6


def test_matrix_setting_stores_marginals_that_agree_with_the_tokens(initialized):
    nlp, _ = initialized
    parser = nlp.get_pipe("pairatt_parser")
    parser.confidence = "matrix"
    try:
        doc = nlp(TEXTS[2])
    finally:
        parser.confidence = "arcs"
    sent = doc[:]
    matrix = sent._.arc_marginals
    assert matrix.shape == (len(doc), len(doc))
    np.testing.assert_allclose(matrix.sum(axis=1), 1.0, atol=1e-5)
    for token in doc:
        column = token.i if token.head.i == token.i else token.head.i
        assert matrix[token.i, column] == pytest.approx(token._.head_prob, rel=1e-5)
    assert nlp(TEXTS[2])[:]._.arc_marginals is None


def _unparsed_documents(nlp, sentence_docs, sizes):
    """Docs of `sizes` gold sentences each (EWT train, boundaries kept, no parse), in text order."""
    documents, start = [], 0
    for size in sizes:
        joined = Doc.from_docs(sentence_docs[start : start + size])
        doc = Doc(nlp.vocab, words=[t.text for t in joined], spaces=[bool(t.whitespace_) for t in joined])
        for token, source in zip(doc, joined):
            token.is_sent_start = source.is_sent_start
        documents.append(doc)
        start += size
    return documents


@pytest.mark.parametrize("level", ["arcs", "matrix"])
def test_a_batch_of_many_sentence_docs_stores_what_each_doc_parsed_alone_does(initialized, ud_train_docs, level):
    """In a batch, chunks take sentences of several Docs by length: heads, labels and every store
    field (sentences in text order, marginal matrices with them) are what parsing each Doc alone gives."""
    nlp, _ = initialized
    parser = nlp.get_pipe("pairatt_parser")
    parser.confidence = level
    try:
        documents = _unparsed_documents(nlp, ud_train_docs, [5, 1, 7, 3])
        batch = list(nlp.pipe([doc.copy() for doc in documents], batch_size=len(documents)))
        alone = [nlp(doc.copy()) for doc in documents]
    finally:
        parser.confidence = "arcs"
    parses = parser.model.predict(list(nlp.get_pipe("transformer").pipe([doc.copy() for doc in documents])))
    order = [(doc_index, start) for parse in parses for doc_index, start, _ in parse.sentences]
    assert order != sorted(order)  # the chunks hold the Docs' sentences out of text order
    for in_batch, by_itself in zip(batch, alone, strict=True):
        assert [(t.head.i, t.dep_) for t in in_batch] == [(t.head.i, t.dep_) for t in by_itself]
        got, expected = in_batch._.pairatt_confidence, by_itself._.pairatt_confidence
        assert got["sent_starts"] == [sent.start for sent in in_batch.sents]
        assert (got["sent_starts"], got["sent_ends"]) == (expected["sent_starts"], expected["sent_ends"])
        np.testing.assert_array_equal(got["heads"], expected["heads"])
        np.testing.assert_array_equal(got["candidates"], expected["candidates"])
        for key in ("head_prob", "dep_prob", "candidate_probs", "tree_prob"):
            np.testing.assert_allclose(got[key], expected[key], rtol=1e-4, atol=1e-6)
        assert len(got["matrices"]) == (len(got["sent_starts"]) if level == "matrix" else 0)
        for sent in in_batch.sents:
            for token in sent:
                assert token._.head_prob is not None and token._.head_candidates
            if level == "matrix":
                matrix, words = sent._.arc_marginals, np.arange(len(sent))
                heads = np.array([t.head.i - sent.start for t in sent])
                np.testing.assert_allclose(matrix[words, heads], [t._.head_prob for t in sent], rtol=1e-5)


def test_confidence_off_stores_nothing_and_parses_the_same(initialized):
    nlp, _ = initialized
    parser = nlp.get_pipe("pairatt_parser")
    with_confidence = nlp(TEXTS[0])
    parser.confidence = "none"
    try:
        without = nlp(TEXTS[0])
    finally:
        parser.confidence = "arcs"
    assert [(t.head.i, t.dep_) for t in without] == [(t.head.i, t.dep_) for t in with_confidence]
    assert without._.pairatt_confidence is None and without[0]._.head_prob is None
    assert without[:]._.parse_confidence is None


def test_a_temperature_changes_confidence_not_the_parse(initialized):
    nlp, _ = initialized
    parser = nlp.get_pipe("pairatt_parser")
    before = nlp(TEXTS[2])
    parser.cfg["arc_temperature"] = 0.05
    try:
        sharper = nlp(TEXTS[2])
    finally:
        parser.cfg["arc_temperature"] = 1.0
    assert [(t.head.i, t.dep_) for t in sharper] == [(t.head.i, t.dep_) for t in before]
    assert np.mean([t._.head_prob for t in sharper]) > np.mean([t._.head_prob for t in before])


def test_confidence_survives_every_serialization_path(initialized, tmp_path):
    nlp, _ = initialized
    docs = list(nlp.pipe(TEXTS))
    expected = [confidence_values(doc) for doc in docs]
    from_bytes = [Doc(nlp.vocab).from_bytes(doc.to_bytes()) for doc in docs]
    doc_bin = DocBin(store_user_data=True)
    for doc in docs:
        doc_bin.add(doc)
    doc_bin.to_disk(tmp_path / "docs.spacy")
    from_docbin = list(DocBin().from_disk(tmp_path / "docs.spacy").get_docs(nlp.vocab))
    multi_process = list(nlp.pipe(TEXTS, n_process=2, batch_size=1))
    nlp.add_pipe("pairatt_release_attention")
    try:
        released = nlp(TEXTS[0])
    finally:
        nlp.remove_pipe("pairatt_release_attention")
    for copies in (from_bytes, from_docbin, multi_process):
        for doc, values in zip(copies, expected):
            got = confidence_values(doc)
            assert got[1] == pytest.approx(values[1], rel=1e-5)
            for (hp, dp, cands), (ehp, edp, ecands) in zip(got[0], values[0]):
                assert hp == pytest.approx(ehp, rel=1e-5) and dp == pytest.approx(edp, rel=1e-5)
                assert [h for h, _ in cands] == [h for h, _ in ecands]
    assert confidence_values(released)[1] == pytest.approx(expected[0][1], rel=1e-5)


def test_a_retokenized_doc_reports_no_stale_confidence(initialized):
    nlp, _ = initialized
    doc = nlp(TEXTS[0])
    with doc.retokenize() as retokenizer:
        retokenizer.merge(doc[0:2])
    assert doc[0]._.head_prob is None and doc[:]._.parse_confidence is None


def test_a_merge_and_a_split_that_keep_the_length_report_no_stale_confidence(initialized):
    """The store keys on the tokens (text, start, whitespace), not on the Doc's length."""
    nlp, _ = initialized
    doc = nlp(TEXTS[0])
    length = len(doc)
    with doc.retokenize() as retokenizer:
        retokenizer.merge(doc[0:2])
        retokenizer.split(doc[8], ["do", "g"], heads=[(doc[8], 1), doc[7]])
    assert len(doc) == length
    assert all(t._.head_prob is None and t._.dep_prob is None and t._.head_candidates is None for t in doc)
    assert all(sent._.parse_confidence is None for sent in doc.sents)
    again = nlp(TEXTS[0])
    again[3].head = again[1]  # a head moved after parsing: its old arc's confidence is not the new arc's
    assert again[3]._.head_prob is None and again[3]._.head_candidates is None and again[2]._.head_prob is not None


WHITESPACE_TEXT = "in  a the in"  # tokens: in, " ", a, the, in


def test_whitespace_tokens_stay_out_of_the_tree_and_every_arc_has_its_own_marginal(initialized):
    nlp, _ = initialized
    parser = nlp.get_pipe("pairatt_parser")
    parser.confidence = "matrix"
    try:
        doc = nlp(WHITESPACE_TEXT)
    finally:
        parser.confidence = "arcs"
    assert [t.is_space for t in doc] == [False, True, False, False, False]
    space = doc[1]
    assert space._.head_prob is None and space._.dep_prob is None and space._.head_candidates is None
    assert space.head.i == 0  # hung from the word before it
    words = [t for t in doc if not t.is_space]
    assert all(not t.head.is_space for t in words)
    (sent,) = doc.sents
    marginals = sent._.arc_marginals
    assert marginals[:, 1][[0, 2, 3, 4]].sum() == 0  # no word may take the whitespace token as head
    for token in words:
        assert token._.head_prob == pytest.approx(float(marginals[token.i, token.head.i]), abs=1e-6)
    tree = np.prod([float(marginals[t.i, t.head.i]) for t in words])  # one sentence: no tree beats its arcs
    assert 0 < sent._.parse_confidence <= min(tree ** (1 / len(words)), 1.0)


def test_parse_writes_each_words_own_arc_confidence_beside_whitespace(initialized, tmp_path):
    """The issue's reproducer: `printf 'in  a the in\n' | parse MODEL -` wrote word 4 as `0 root` with
    the HeadProb of its arc to the whitespace token."""
    nlp, _ = initialized
    nlp.to_disk(tmp_path / "model")
    result = subprocess.run(
        [sys.executable, "-m", "spacy_pairatt", "parse", tmp_path / "model", "-", "--no-progress"],
        input=WHITESPACE_TEXT + "\n",
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    rows = [line.split("\t") for line in result.stdout.splitlines() if line and not line.startswith("#")]
    expected = [t for t in nlp(WHITESPACE_TEXT) if not t.is_space]
    assert [row[1] for row in rows] == [t.text for t in expected]
    word_ids = {t.i: k for k, t in enumerate(expected, 1)}
    assert [int(row[6]) for row in rows] == [0 if t.head.i == t.i else word_ids[t.head.i] for t in expected]
    misc = [dict(item.split("=", 1) for item in row[9].split("|") if "=" in item) for row in rows]
    assert [float(m["HeadProb"]) for m in misc] == pytest.approx([t._.head_prob for t in expected], abs=1e-4)


def test_a_word_rehung_from_a_whitespace_token_is_written_without_confidence(initialized):
    from spacy_pairatt.parse_files.reading import SOURCE_KEY
    from spacy_pairatt.parse_files.writing import conllu_blocks

    nlp, _ = initialized
    doc = nlp(WHITESPACE_TEXT)
    doc[4].head = doc[1]  # as another parser might leave it: a word under the whitespace token
    doc.user_data[SOURCE_KEY] = {"id": "1", "comments": []}
    rows = [line.split("\t") for line in conllu_blocks(doc).splitlines() if line and not line.startswith("#")]
    assert "HeadProb" not in rows[3][9]  # word 4, re-hung from the whitespace token
    assert all("HeadProb" in row[9] for row in rows[:3])


def test_settings_are_checked_and_a_pipeline_saved_before_them_loads(initialized, tiny_bert_dir, tmp_path):
    with pytest.raises(ValueError, match="confidence"):
        make_pipeline(tiny_bert_dir, {"confidence": "all"})
    with pytest.raises(ValueError, match="head_candidates"):
        make_pipeline(tiny_bert_dir, {"head_candidates": 0})
    with pytest.raises(ValueError, match="BiaffinePairScorer"):
        make_pipeline(
            tiny_bert_dir,
            {
                "arc_objective": "tree_crf",
                "model": {"pair_scorer": {"@architectures": "spacy-pairatt.PaperPairScorer.v1"}},
            },
        )
    nlp, _ = initialized
    nlp.to_disk(tmp_path / "model")
    config_path = tmp_path / "model" / "config.cfg"
    lines = config_path.read_text().splitlines()
    old_keys = ("arc_objective", "confidence", "head_candidates")
    config_path.write_text("\n".join(line for line in lines if not line.startswith(old_keys)) + "\n")
    cfg_path = tmp_path / "model" / "pairatt_parser" / "cfg"
    cfg = json.loads(cfg_path.read_text())
    cfg.pop("arc_temperature"), cfg.pop("label_temperature")
    cfg_path.write_text(json.dumps(cfg))
    loaded = spacy.load(tmp_path / "model", config={"components": {"pairatt_parser": {"head_candidates": 2}}})
    doc = loaded(TEXTS[0])
    assert all(len(t._.head_candidates) == 2 for t in doc) and loaded.get_pipe("pairatt_parser").confidence == "arcs"


def test_tree_crf_objective_trains(tiny_bert_dir, ud_train_docs):
    fix_random_seed(0)
    random.seed(0)
    nlp = make_pipeline(tiny_bert_dir, {"arc_objective": "tree_crf"})
    examples = examples_from_docs(nlp, ud_train_docs[:20])
    nlp.initialize(lambda: examples)
    optimizer = Adam(1e-3)
    losses = []
    for _ in range(8):
        step = {}
        for batch in spacy.util.minibatch(examples, 10):
            nlp.update(batch, sgd=optimizer, losses=step)
        losses.append(step["pairatt_parser"])
    assert np.isfinite(losses).all() and losses[-1] < 0.7 * losses[0]


def test_render_parse_labels_and_shades_arcs(initialized):
    nlp, _ = initialized
    doc = nlp(TEXTS[0])
    markup = render_parse(doc)
    n_arcs = sum(1 for t in doc if t.head.i != t.i)
    assert markup.count("stroke-opacity=") == n_arcs
    weakest = min((t for t in doc if t.head.i != t.i), key=lambda t: t._.head_prob)
    assert f"{weakest.dep_} {weakest._.head_prob:.2f}" in markup
    plain = render_parse(doc, probabilities=False, shade=False)
    assert "stroke-opacity" not in plain and f"{weakest._.head_prob:.2f}<" not in plain


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "spacy_pairatt", *map(str, args)], capture_output=True, text=True, cwd=REPO
    )


def test_review_lists_the_least_confident_sentences_first(initialized, tmp_path):
    nlp, _ = initialized
    nlp.to_disk(tmp_path / "model")
    source = tmp_path / "in.txt"
    source.write_text("\n".join(text for text in TEXTS if text) + "\n", encoding="utf8")
    result = run_cli("review", tmp_path / "model", source, "--top", 2, "--json")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    parsed = list(nlp.pipe(text for text in TEXTS if text))
    everything = sorted(sent._.parse_confidence for doc in parsed for sent in doc.sents)
    assert [r["parse_confidence"] for r in records] == pytest.approx(everything[:2], rel=1e-4)
    least = min((sent for doc in parsed for sent in doc.sents), key=lambda sent: sent._.parse_confidence)
    assert records[0]["text"] == least.text
    assert records[0]["least_sure_arc"]["head_prob"] == pytest.approx(min(t._.head_prob for t in least), abs=1e-4)


def test_review_refuses_in_one_line_a_pipeline_without_confidence(initialized, tmp_path):
    nlp, _ = initialized
    source = tmp_path / "in.txt"
    source.write_text("A short line.\n", encoding="utf8")
    nlp.to_disk(tmp_path / "model")
    spacy.load(tmp_path / "model", config={"components": {"pairatt_parser": {"confidence": "none"}}}).to_disk(
        tmp_path / "quiet"
    )
    transition = spacy.blank("en")
    transition.add_pipe("parser")
    transition.initialize()
    transition.to_disk(tmp_path / "transition")
    for model, says in (("quiet", 'confidence = "arcs"'), ("transition", "has no pairatt_parser")):
        result = run_cli("review", tmp_path / model, source)
        assert result.returncode != 0 and result.stdout == ""
        assert len(result.stderr.strip().splitlines()) == 1 and says in result.stderr, result.stderr


def test_review_json_keeps_every_record_on_one_line_for_splitlines(initialized, tmp_path):
    nlp, _ = initialized
    nlp.to_disk(tmp_path / "model")
    source = tmp_path / "in.txt"
    source.write_text("A line\u2028with\u2029odd\x85breaks\x1cand\x0bmore.\n", encoding="utf8", newline="\n")
    result = run_cli("review", tmp_path / "model", source, "--json", "--input-format", "text")
    assert result.returncode == 0, result.stderr
    (record,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert "\u2028" in record["text"] and "\x85" in record["text"]


def test_calibrate_fits_stores_and_reports(initialized, tmp_path):
    nlp, _ = initialized
    nlp.to_disk(tmp_path / "model")
    dev = tmp_path / "dev.spacy"
    test = tmp_path / "test.spacy"
    for split, path in (("dev", dev), ("test", test)):
        conllu = write_first_sentences(UD_DIR / f"en_ewt-ud-{split}.conllu", 30, tmp_path / f"{split}.conllu")
        result = subprocess.run(
            [sys.executable, "-m", "spacy", "convert", conllu, tmp_path, "--converter", "conllu", "--n-sents", "1"],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stderr
    report_path, plot = tmp_path / "calibration.json", tmp_path / "calibration.png"
    result = run_cli("calibrate", tmp_path / "model", dev, test, "--output", report_path, "--plot", plot)
    assert result.returncode == 0, result.stderr
    report = json.loads(report_path.read_text())
    for key in ("head_prob_ece", "dep_prob_ece", "sentence_error_recall_at_20pct"):
        assert 0 <= report[key] <= 1
    assert report["dev_after"]["head_prob_nll"] <= report["dev_before"]["head_prob_nll"] + 1e-9
    assert plot.stat().st_size > 1000
    stored = spacy.load(tmp_path / "model").get_pipe("pairatt_parser").cfg
    assert stored["arc_temperature"] == pytest.approx(report["arc_temperature"])
    assert stored["label_temperature"] == pytest.approx(report["label_temperature"])


def test_parse_writes_confidence_in_misc_and_json(initialized, tmp_path):
    nlp, _ = initialized
    nlp.to_disk(tmp_path / "model")
    source = tmp_path / "in.txt"
    source.write_text(TEXTS[0] + "\n", encoding="utf8")
    expected = nlp(TEXTS[0])
    conllu = run_cli("parse", tmp_path / "model", source, "--no-progress")
    assert conllu.returncode == 0, conllu.stderr
    rows = [line.split("\t") for line in conllu.stdout.splitlines() if line and not line.startswith("#")]
    misc = [dict(item.split("=", 1) for item in row[9].split("|") if "=" in item) for row in rows]
    assert [float(m["HeadProb"]) for m in misc] == pytest.approx([t._.head_prob for t in expected], abs=1e-4)
    assert [float(m["DepProb"]) for m in misc] == pytest.approx([t._.dep_prob for t in expected], abs=1e-4)
    lines = run_cli("parse", tmp_path / "model", source, "--no-progress", "--output-format", "json")
    record = json.loads(lines.stdout)
    assert [t["head_prob"] for t in record["tokens"]] == pytest.approx([t._.head_prob for t in expected], rel=1e-5)
    assert [t["head_candidates"][0][0] for t in record["tokens"]] == [t._.head_candidates[0][0] for t in expected]
    assert record["sentences"][0]["parse_confidence"] == pytest.approx(expected[:]._.parse_confidence, rel=1e-5)


@pytest.fixture(scope="module")
def calibration_files(initialized, tmp_path_factory):
    """(a saved pipeline, dev and test .spacy of a few EWT sentences, an empty corpus, one without parses)."""
    from spacy.training.converters import conllu_to_docs

    nlp, _ = initialized
    folder = tmp_path_factory.mktemp("calibration")
    nlp.to_disk(folder / "model")
    for split in ("dev", "test"):
        conllu = write_first_sentences(UD_DIR / f"en_ewt-ud-{split}.conllu", 8, folder / f"{split}.conllu")
        docs = conllu_to_docs(conllu.read_text(encoding="utf8"), n_sents=1)
        DocBin(docs=docs).to_disk(folder / f"{split}.spacy")
    DocBin().to_disk(folder / "empty.spacy")
    DocBin(docs=[nlp.make_doc(text) for text in TEXTS if text]).to_disk(folder / "raw.spacy")
    return folder


def stored_state(model):
    """What calibrate may change: the parser's cfg and the config, as files."""
    return {name: (model / name).read_bytes() for name in ("config.cfg", "pairatt_parser/cfg")}


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_stop_signal_while_calibrate_saves_leaves_the_old_pipeline(calibration_files, tmp_path, monkeypatch, stop):
    """The issue's case: a SIGTERM while it saved left transformer/model empty, a SIGINT a mix of new
    config and old parser cfg. The signal comes once the new pipeline is half written."""
    from spacy.language import Language

    from spacy_pairatt.cli import main

    model = tmp_path / "model"
    shutil.copytree(calibration_files / "model", model)
    before = stored_state(model)
    to_disk = Language.to_disk

    def half_written(nlp, path, **options):
        to_disk(nlp, path, **options)
        (Path(path) / "pairatt_parser" / "model").unlink()
        os.kill(os.getpid(), getattr(signal, stop))

    monkeypatch.setattr(Language, "to_disk", half_written)
    corpora = [calibration_files / "dev.spacy", calibration_files / "test.spacy"]
    with pytest.raises(SystemExit, match="^python -m spacy_pairatt calibrate: interrupted$"):
        main(["calibrate", str(model), *map(str, corpora), "--output", str(tmp_path / "report.json")])
    # the report is written before the pipeline is stored
    assert stored_state(model) == before and sorted(os.listdir(tmp_path)) == ["model", "report.json"]
    monkeypatch.undo()
    assert spacy.load(model).get_pipe("pairatt_parser").cfg["arc_temperature"] == 1.0


def test_calibrate_checks_its_inputs_before_storing_anything(calibration_files, tmp_path):
    from spacy_pairatt.cli import main

    model = tmp_path / "model"
    shutil.copytree(calibration_files / "model", model)
    before = stored_state(model)
    dev, test = str(calibration_files / "dev.spacy"), str(calibration_files / "test.spacy")
    (tmp_path / "a-file").write_text("")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("mine")
    cases = [
        (["--plot", str(tmp_path)], f"--plot {tmp_path} is a folder"),
        (
            ["--plot", str(tmp_path / "a-file" / "plot.png")],
            f"--plot .*: {tmp_path / 'a-file'} is a file, not a folder",
        ),
        (["--plot", str(tmp_path / "plot.nope")], r"--plot .*plot.nope: matplotlib writes no .nope files \(it writes"),
        (["--output", str(tmp_path / "a-file" / "report.json")], "--output .* is a file, not a folder"),
        (["--store-in", str(tmp_path / "mine")], ".*mine holds files but no pipeline"),
        (
            ["--store-in", str(tmp_path / "a-file" / "model")],
            f"cannot store the pipeline in .*model: {tmp_path / 'a-file'} is a file, not a folder",
        ),
    ]
    for options, message in cases:
        with pytest.raises(SystemExit, match=f"^python -m spacy_pairatt calibrate: error: {message}") as exit:
            main(["calibrate", str(model), dev, test, *options])
        assert "\n" not in str(exit.value)
    for corpus, message in (("empty.spacy", "holds no documents"), ("raw.spacy", "3 of its 3 documents have no gold")):
        with pytest.raises(SystemExit, match=f"^python -m spacy_pairatt calibrate: error: .*{corpus}.*{message}"):
            main(["calibrate", str(model), str(calibration_files / corpus), test])
    assert stored_state(model) == before and (tmp_path / "mine" / "keep.txt").read_text() == "mine"
    assert sorted(os.listdir(tmp_path)) == ["a-file", "mine", "model"]


def test_calibrate_refuses_a_folder_without_room_before_calibrating(calibration_files, monkeypatch):
    """A full folder was found only after the whole calibration; its free space is checked first."""
    from spacy_pairatt.cli import main

    model = calibration_files / "model"
    monkeypatch.setattr(shutil, "disk_usage", lambda path: SimpleNamespace(total=10**12, used=10**12, free=1000))
    monkeypatch.setattr(spacy, "load", lambda *args, **kwargs: pytest.fail("loaded the pipeline"))
    corpora = [str(calibration_files / name) for name in ("dev.spacy", "test.spacy")]
    with pytest.raises(SystemExit, match=r"cannot store the pipeline in .*model: .* has 0\.0 MB free, the pipeline"):
        main(["calibrate", str(model), *corpora])


def test_calibrate_on_a_full_disk_keeps_its_report_and_the_old_pipeline(
    calibration_files, tmp_path, capsys, monkeypatch
):
    """The report is printed and written before the pipeline is stored: a store that fails, the disk
    full once the pipeline is being saved, loses none of it."""
    from spacy.language import Language

    from spacy_pairatt.cli import main

    model, report = tmp_path / "model", tmp_path / "report.json"
    shutil.copytree(calibration_files / "model", model)
    before = stored_state(model)
    to_disk = Language.to_disk

    def on_a_full_disk(nlp, path, **options):
        with file_size_limit(200_000):
            to_disk(nlp, path, **options)

    monkeypatch.setattr(Language, "to_disk", on_a_full_disk)
    corpora = [str(calibration_files / name) for name in ("dev.spacy", "test.spacy")]
    with pytest.raises(SystemExit) as exit:
        main(["calibrate", str(model), *corpora, "--output", str(report)])
    assert str(exit.value) == (
        f"python -m spacy_pairatt calibrate: error: {model}: File too large "
        f"(the report is on stdout and in {report}; {model} is as it was)"
    )
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads(report.read_text()) and 0 <= printed["head_prob_ece"] <= 1
    assert stored_state(model) == before and sorted(os.listdir(tmp_path)) == ["model", "report.json"]


def test_calibrate_through_a_link_calibrates_the_pipeline_it_names(calibration_files, tmp_path):
    """The issue's case: `calibrate cslink dev test` left cs uncalibrated and made cslink a copy."""
    from spacy_pairatt.cli import main

    model, link = tmp_path / "cs", tmp_path / "cslink"
    shutil.copytree(calibration_files / "model", model)
    link.symlink_to(model)
    corpora = [str(calibration_files / name) for name in ("dev.spacy", "test.spacy")]
    main(["calibrate", str(link), *corpora, "--output", str(tmp_path / "report.json")])
    report = json.loads((tmp_path / "report.json").read_text())
    assert link.is_symlink() and os.readlink(link) == str(model)
    stored = spacy.load(model).get_pipe("pairatt_parser").cfg
    assert stored["arc_temperature"] == pytest.approx(report["arc_temperature"]) != 1.0
    assert sorted(os.listdir(tmp_path)) == ["cs", "cslink", "report.json"]
