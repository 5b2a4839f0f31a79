"""configs/pipeline_minilm.cfg trained for 2 steps on a tiny random BERT, and `parse`
writing every CoNLL-U column that pipeline sets, scored with ud-eval from raw text and gold tokens.

The tiny encoder and two steps only show that the config builds, trains and annotates: the scores
here say nothing about accuracy.
"""

import json
from pathlib import Path

import conllu
import numpy as np
import pytest
import spacy
import torch
from spacy import displacy
from spacy.tokens import DocBin
from spacy.training import Example
from spacy.training.converters import conllu_to_docs

from docs_build.limits import model_card_notes
from spacy_pairatt.corpora.ud_documents import annotated_paragraph_docs, document_texts
from spacy_pairatt.evaluation.ud_eval import evaluate_files, write_results
from spacy_pairatt.packaging.shipped_pipeline import assemble_pipeline
from spacy_pairatt.parse_files.parsing import parse_file
from spacy_pairatt.reporting.tables import percent
from tests.conftest import REPO, UD_DIR, train_ud_pipeline, write_first_sentences

N_SENTENCES = 40  # two paragraphs: the first to train on, the second (sentences 22-40) for dev


@pytest.fixture(scope="module")
def ewt_block(tmp_path_factory):
    """The first N_SENTENCES sentences of EWT train as a CoNLL-U file."""
    source = UD_DIR / "en_ewt-ud-train.conllu"
    if not source.exists():
        pytest.skip(f"UD English-EWT not found at {source}")
    return write_first_sentences(source, N_SENTENCES, tmp_path_factory.mktemp("ud_pipeline") / "ewt.conllu")


@pytest.fixture(scope="module")
def trained_model(tiny_bert_dir, ewt_block, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ud_pipeline_train")
    docs = annotated_paragraph_docs(spacy.blank("en").vocab, ewt_block.read_text(encoding="utf8"))
    assert len(docs) == 2 and all(doc.has_annotation(attr) for doc in docs for attr in ("TAG", "POS", "MORPH", "LEMMA"))
    # the segmenters' data: the same text with sentence starts only, as `ud-docs` writes it
    DocBin(attrs=["SENT_START"], docs=docs).to_disk(folder / "segmenter.spacy")
    return train_ud_pipeline("pipeline_minilm.cfg", tiny_bert_dir, docs, folder)


def train_segmenter(config: str, trained_model: Path, output: str, **overrides) -> Path:
    """configs/`config` trained for 2 steps on the 2-step pipeline's paragraphs, sentence starts only."""
    from spacy.cli.train import train

    folder = trained_model.parent.parent
    settings = {
        "paths.train": str(folder / "segmenter.spacy"),
        "paths.dev": str(folder / "segmenter.spacy"),
        "training.max_steps": 2,
        "training.eval_frequency": 1000,
        **overrides,
    }
    train(REPO / "configs" / config, folder / output, overrides=settings)
    return folder / output / "model-last"


@pytest.fixture(scope="module")
def stage_two_model(trained_model):
    """Stage 2: configs/segmenter_standalone.cfg put in place of the 2-step pipeline's senter, as
    stage 2 did until the senter became a head of the pipeline (docs/ud_pipeline.md)."""
    segmenter = train_segmenter("segmenter_standalone.cfg", trained_model, "segmenter")
    assemble_pipeline(str(trained_model), str(trained_model.parent.parent / "stage2"), senter=str(segmenter))
    return trained_model.parent.parent / "stage2"


def test_stage_two_puts_the_segmenter_in_place_of_the_senter_and_keeps_every_other_component(
    trained_model, stage_two_model
):
    """The second stage changes the senter alone: the other components' weights are stage 1's, byte for
    byte, and the new senter (a pairatt_segmenter on its own encoder: a BiLSTM over the Doc) no longer
    listens to the transformer."""
    first, second = spacy.load(trained_model), spacy.load(stage_two_model)
    assert second.pipe_names == first.pipe_names and first.pipe_names[-1] == "pairatt_release_attention"
    assert second.get_pipe_meta("senter").factory == "pairatt_segmenter"
    encoders = [nlp.get_pipe("transformer").model.transformer.state_dict() for nlp in (first, second)]
    assert all(torch.equal(weights, encoders[1][key]) for key, weights in encoders[0].items())
    for name in ("tagger", "morphologizer", "trainable_lemmatizer", "pairatt_parser"):
        assert second.get_pipe(name).model.to_bytes() == first.get_pipe(name).model.to_bytes(), name
    assert any(node.name == "pytorch" for node in second.get_pipe("senter").model.walk())  # the BiLSTM
    assert len(second.get_pipe("transformer").listeners) == 4
    doc = second(TEXT + "\n\nA second paragraph")
    assert doc.has_annotation("SENT_START") and doc.has_annotation("DEP") and all(t.lemma_ for t in doc)
    assert doc[-3].is_sent_start  # after the paragraph break
    assert len(second("")) == 0  # an empty Doc passes the BiLSTM segmenter


def sweep(model: Path, gold: Path, output: Path, *options: str) -> dict:
    from spacy_pairatt.cli import main

    markdown = output.with_suffix(".md")
    main(["segmenter-sweep", str(model), str(gold), "--thresholds", "0.3", "0.6", "--output", str(output),
          "--markdown", str(markdown), *options])  # fmt: skip
    return {**json.loads(output.read_text(encoding="utf8")), "markdown": markdown.read_text(encoding="utf8")}


def test_stage_two_stores_the_segmenters_threshold_and_changes_nothing_else(trained_model, ewt_block, tmp_path):
    """Stage 2 as `train-pipeline` runs it after training: the one-member senter's thresholds swept on the gold
    text and the best stored; the senter's weights and every other component are stage 1's."""
    shipped = tmp_path / "segmented"
    assemble_pipeline(str(trained_model), str(shipped))
    stored = sweep(shipped, ewt_block, tmp_path / "stored.json", "--store")
    assert [row["threshold"] for row in stored["rows"]] == [0.3, 0.6] and stored["best"] in (0.3, 0.6)
    first, second = spacy.load(trained_model), spacy.load(shipped)
    senter = second.get_pipe("senter")
    assert senter.threshold == stored["best"] and senter.model.attrs["members"] == 1
    assert second.config["components"]["senter"]["threshold"] == stored["best"]
    for name in ("senter", "tagger", "morphologizer", "trainable_lemmatizer", "pairatt_parser"):
        assert second.get_pipe(name).model.to_bytes() == first.get_pipe(name).model.to_bytes(), name


@pytest.fixture(scope="module")
def listener_segmenter(trained_model):
    """configs/segmenter_listener.cfg (four members) trained on stage 1's transformer."""
    return spacy.load(
        train_segmenter(
            "segmenter_listener.cfg", trained_model, "listener", **{"paths.encoder_pipeline": str(trained_model)}
        )
    )


def test_an_ensemble_segmenter_sweeps_its_member_counts_and_stores_the_first(
    trained_model, listener_segmenter, ewt_block, tmp_path
):
    """A four-member senter in the pipeline: each member count swept without changing the pipeline,
    then `--members 1 --store`: the saved senter is the ensemble's first member alone (config and
    weights), with the threshold chosen for it."""
    from spacy_pairatt.layers.ensemble import first_members
    from spacy_pairatt.packaging.shipped_pipeline import put_senter

    nlp = spacy.load(trained_model)
    put_senter(nlp, listener_segmenter, "the listener")
    shipped = tmp_path / "ensemble"
    nlp.to_disk(shipped)
    counts = sweep(shipped, ewt_block, tmp_path / "members.json", "--members", "1", "2", "4")
    assert [(row["members"], row["threshold"]) for row in counts["rows"]] == [
        (count, threshold) for count in (1, 2, 4) for threshold in (0.3, 0.6)
    ]
    assert counts["best_members"] in (1, 2, 4) and spacy.load(shipped).get_pipe("senter").model.attrs["members"] == 4
    lines = counts["markdown"].splitlines()
    best_of_each = [line.split(" | ")[0] for line in lines if line[:3] in ("| 1", "| 2", "| 4")]
    assert best_of_each == ["| 1", "| 2", "| 4"]  # one row a count, its best threshold
    stored = sweep(shipped, ewt_block, tmp_path / "stored.json", "--members", "1", "--store")
    assert stored["rows"] == counts["rows"][:2] and stored["best_members"] == 1
    assert f"Best: **{stored['best']}** with 1 member(s)" in stored["markdown"]
    second = spacy.load(shipped)
    senter = second.get_pipe("senter")
    assert senter.threshold == stored["best"] and senter.model.attrs["members"] == 1
    assert second.config["components"]["senter"]["model"]["members"] == 1
    assert len(senter.to_bytes()) < len(nlp.get_pipe("senter").to_bytes()) / 2
    docs = [pipeline.make_doc(TEXT + "\n\nA second paragraph") for pipeline in (nlp, second)]
    for pipeline, doc in zip((nlp, second), docs):
        pipeline.get_pipe("transformer")(doc)
    nlp.get_pipe("senter").model = first_members(nlp.get_pipe("senter").model, 1)
    expected = nlp.get_pipe("senter").start_probabilities(docs[:1])[0]
    np.testing.assert_allclose(senter.start_probabilities(docs[1:])[0], expected, rtol=1e-5, atol=1e-6)


def test_a_segmenter_listening_to_a_transformer_joins_only_a_pipeline_with_its_weights(
    trained_model, listener_segmenter
):
    """configs/segmenter_listener.cfg on stage 1's transformer goes in place of stage 1's senter; on a
    transformer whose weights differ its listener would read features it never saw: refused."""
    from spacy_pairatt.packaging.shipped_pipeline import put_senter

    listener = listener_segmenter
    same = spacy.load(trained_model)
    put_senter(same, listener, "the listener")
    assert (
        same.pipe_names[:2] == ["transformer", "senter"] and same.get_pipe_meta("senter").factory == "pairatt_segmenter"
    )
    assert same(TEXT).has_annotation("SENT_START")
    other = spacy.load(trained_model)
    with torch.no_grad():
        next(other.get_pipe("transformer").model.transformer.parameters()).add_(1.0)
    with pytest.raises(ValueError, match="listens to its own 'transformer', whose weights differ from the pipeline's"):
        put_senter(other, listener, "the listener")


TEXT = "The dog barked at me. I didn't know why, so I left."


def test_pipeline_config_trains_and_annotates_everything(trained_model):
    nlp = spacy.load(trained_model)
    assert nlp.pipe_names == [
        "transformer",
        "senter",
        "tagger",
        "morphologizer",
        "trainable_lemmatizer",
        "pairatt_parser",
        "pairatt_release_attention",
    ]
    doc = nlp(TEXT)
    for attr in ("TAG", "POS", "LEMMA", "DEP", "SENT_START"):
        assert doc.has_annotation(attr), attr
    assert all(token.pos_ for token in doc) and all(token.lemma_ for token in doc)


def test_every_component_listens_to_the_one_transformer_and_sends_it_gradients(trained_model, ewt_block):
    from spacy.training import Example

    nlp = spacy.load(trained_model)
    listeners = nlp.get_pipe("transformer").listeners
    assert len(listeners) == 5
    docs = list(conllu_to_docs(ewt_block.read_text(encoding="utf8"), n_sents=10, no_print=True))[:1]
    examples = [Example(nlp.make_doc(doc.text), doc) for doc in docs]
    losses = nlp.update(examples, sgd=False, annotates=["senter"])
    trained = set(nlp.pipe_names) - {"pairatt_release_attention"}  # it trains nothing
    assert set(losses) == trained and all(loss > 0 for loss in losses.values()), losses


def test_parse_writes_upos_xpos_feats_lemma_and_space_after(trained_model, tmp_path):
    source = tmp_path / "input.txt"
    source.write_text(TEXT + "\n", encoding="utf8")
    output = tmp_path / "output.conllu"
    parse_file(str(trained_model), str(source), str(output), progress=False)
    doc = spacy.load(trained_model)(TEXT)
    lines = [token for sentence in conllu.parse(output.read_text(encoding="utf8")) for token in sentence]
    rows = [row for row in lines if isinstance(row["id"], int)]
    # `didn't` is one token of two words: a multiword token line carries its SpaceAfter
    assert [(row["form"], row["misc"]) for row in lines if not isinstance(row["id"], int)] == [("didn't", None)]
    assert [row["form"] for row in rows] == [token.text for token in doc]
    for row, token in zip(rows, doc):
        assert row["upos"] == (token.pos_ or "_")
        assert row["xpos"] == (token.tag_ or "_")
        assert row["lemma"] == (token.lemma_ or "_")
        assert (row["feats"] or {}) == dict(feat.split("=", 1) for feat in str(token.morph).split("|") if feat)
        in_multiword_token = token.text in ("did", "n't")
        assert (row["misc"] or {}).get("SpaceAfter") == (None if token.whitespace_ or in_multiword_token else "No")
    assert any(row["upos"] != "_" for row in rows) and any(row["xpos"] != "_" for row in rows)


def test_raw_text_and_gold_tokens_through_parse_and_ud_eval(trained_model, ewt_block, tmp_path):
    # sentences 31-40 of the block (in the dev paragraph), as raw text (one line) and as gold CoNLL-U
    blocks = ewt_block.read_text(encoding="utf8").split("\n\n")
    gold = tmp_path / "gold.conllu"
    gold.write_text("\n\n".join(block for block in blocks[30:40]).strip("\n") + "\n\n", encoding="utf8")
    raw = tmp_path / "raw.txt"
    raw.write_text(" ".join(document_texts(gold.read_text(encoding="utf8").splitlines(True))) + "\n", encoding="utf8")
    from_text, from_tokens = tmp_path / "from_text.conllu", tmp_path / "from_tokens.conllu"
    parse_file(str(trained_model), str(raw), str(from_text), progress=False)
    parse_file(str(trained_model), str(gold), str(from_tokens), input_format="conllu", progress=False)
    text_scores = evaluate_files(gold, from_text)
    token_scores = evaluate_files(gold, from_tokens)
    # spaCy's tokenizer on raw EWT text finds most tokens; gold tokens give every word and sentence
    assert text_scores["Tokens"].f1 > 0.8 and text_scores["Words"].f1 > 0.8
    assert token_scores["Words"].f1 == token_scores["Sentences"].f1 == 1.0
    assert all(0.0 <= score.f1 <= 1.0 for score in text_scores.values())


def test_assembled_as_en_pairatt_it_ships_every_annotation_and_its_scores(trained_model, ewt_block, tmp_path):
    """`package`'s assemble step: its own senter, the release component, ud-eval scores in meta.json
    under spaCy's names and in the model card, and tags that displaCy shows."""
    gold = tmp_path / "gold.conllu"
    gold.write_text("\n\n".join(ewt_block.read_text(encoding="utf8").split("\n\n")[30:40]).strip("\n") + "\n\n")
    system = tmp_path / "system.conllu"
    parse_file(str(trained_model), str(gold), str(system), input_format="conllu", progress=False)
    scores = evaluate_files(gold, system)
    ud_scores = tmp_path / "checkout" / "results" / "ud_pipeline_test_gold_tokens.json"
    write_results(scores, gold, system, ud_scores)
    raw = tmp_path / "raw.txt"
    raw.write_text(" ".join(document_texts(gold.read_text(encoding="utf8").splitlines(True))) + "\n", encoding="utf8")
    from_text = tmp_path / "from_text.conllu"
    parse_file(str(trained_model), str(raw), str(from_text), progress=False)
    raw_scores = evaluate_files(gold, from_text)
    sentence_scores = tmp_path / "checkout" / "results" / "ud_pipeline_test_raw_text.json"
    write_results(raw_scores, gold, from_text, sentence_scores)
    accuracy = tmp_path / "accuracy.json"  # `evaluate --sentences gold`: its sentence figures are 1.0
    accuracy.write_text(json.dumps({"sentences": "gold", "scores": {"dep_las": 0.5, "sents_f": 1.0, "sents_p": 1.0}}))
    shipped = tmp_path / "shipped"
    assemble_pipeline(
        str(trained_model),
        str(shipped),
        str(accuracy),
        notes=model_card_notes(tmp_path / "checkout"),
        ud_scores=str(ud_scores),
        sentence_scores=str(sentence_scores),
    )

    nlp = spacy.load(shipped)
    assert nlp.pipe_names == spacy.load(trained_model).pipe_names
    performance = nlp.meta["performance"]
    for metric, key in (("UPOS", "pos_acc"), ("XPOS", "tag_acc"), ("UFeats", "morph_acc"), ("Lemmas", "lemma_acc")):
        assert performance[key] == pytest.approx(scores[metric].f1)
    assert performance["dep_las"] == 0.5  # the accuracy file's parse scores, without its gold-sentence ones
    sentences = raw_scores["Sentences"]
    assert (performance["sents_p"], performance["sents_r"], performance["sents_f"]) == pytest.approx(
        (sentences.precision, sentences.recall, sentences.f1)
    )
    assert "Penn Treebank tags" in nlp.meta["description"] and "lemmas" in nlp.meta["description"]
    assert "With their own model" not in nlp.meta["description"]  # every component reads the transformer
    card = (shipped / "README.md").read_text(encoding="utf8")
    assert f"- EWT test, gold tokens and sentences (CoNLL 2018 metrics, F1): UPOS {percent(scores['UPOS'].f1)}" in card
    doc = nlp(TEXT)
    assert len(list(doc.sents)) >= 1 and all(token.pos_ and token.tag_ and token.lemma_ for token in doc)
    assert f">{doc[1].pos_}</tspan>" in displacy.render(doc, style="dep")
    assemble_pipeline(str(trained_model), str(tmp_path / "no_sentence_scores"), str(accuracy))
    assert "sents_f" not in spacy.load(tmp_path / "no_sentence_scores").meta["performance"]
    overridden = spacy.load(shipped, config={"components": {"tagger": {"overwrite": True}}})
    assert overridden.get_pipe("tagger").cfg["overwrite"] is True  # not the saved False


def test_the_converted_ewt_corpus_keeps_tags_morphology_and_lemmas():
    path = REPO / "corpus" / "ud_ewt_docs" / "en_ewt-ud-dev.spacy"
    if not path.exists():
        pytest.skip(f"{path} not converted (spacy project run convert)")
    docs = list(DocBin().from_disk(path).get_docs(spacy.blank("en").vocab))
    for attr in ("TAG", "POS", "MORPH", "LEMMA", "DEP", "SENT_START"):
        assert all(doc.has_annotation(attr) for doc in docs), attr
    assert sum(len(list(doc.sents)) for doc in docs) == 2001 and len(docs) == 201


def test_pipeline_config_budget_matches_the_parser_alone():
    """Same steps, batches, schedule shape and dropout; the encoder at the parser alone's rate (the
    heads' 1e-3 scaled by the transformer's learn_rate_scale), the senter's sentences read from real
    transformer output."""
    parser, pipeline = (
        spacy.util.load_config(REPO / "configs" / f"{name}.cfg") for name in ("parser_minilm", "pipeline_minilm")
    )
    for key in ("max_steps", "batcher", "dropout"):
        assert pipeline["training"][key] == parser["training"][key], key
    optimizers = [dict(config["training"]["optimizer"]) for config in (parser, pipeline)]
    schedules = [dict(optimizer.pop("learn_rate")) for optimizer in optimizers]
    assert optimizers[0] == optimizers[1]
    for schedule in schedules:
        schedule.pop("initial_rate")
    assert schedules[0] == schedules[1]
    transformers = [dict(config["components"]["transformer"]) for config in (parser, pipeline)]
    # the UD pipeline stays on float32 until its own bfloat16 checks are made (docs/performance.md#precision)
    precisions = [dict(transformer["model"]).get("precision") for transformer in transformers]
    assert precisions == ["auto", "float32"]
    for transformer in transformers:
        transformer["model"] = {key: value for key, value in transformer["model"].items() if key != "precision"}
    scale = transformers[1].pop("learn_rate_scale")
    assert transformers[0].get("learn_rate_scale", 1.0) == 1.0 and transformers[0] == transformers[1]
    heads_rate = pipeline["training"]["optimizer"]["learn_rate"]["initial_rate"]
    assert heads_rate * scale == pytest.approx(parser["training"]["optimizer"]["learn_rate"]["initial_rate"])
    assert pipeline["training"]["annotating_components"] == ["transformer", "senter"]
    assert Path(pipeline["paths"]["train"]).parent.name == "ud_ewt_paragraph_docs"


def test_the_base_size_pipeline_config_is_the_minilm_ones_on_mpnet():
    """configs/pipeline_mpnet.cfg (en_pairatt_trf) differs from pipeline_minilm.cfg in its encoder and
    precision only: every other setting is the MiniLM pipeline's, so a change to one reaches both."""
    from spacy_pairatt.training.resumable import flat_settings

    minilm, mpnet = (
        flat_settings(spacy.util.load_config(REPO / "configs" / f"pipeline_{name}.cfg", interpolate=True))
        for name in ("minilm", "mpnet")
    )
    changed = sorted(key for key in minilm.keys() | mpnet.keys() if minilm.get(key) != mpnet.get(key))
    assert changed == [
        "components.transformer.model.name",
        "components.transformer.model.name.@misc",
        "components.transformer.model.precision",
        "paths.encoder",
    ]
    assert mpnet["components.transformer.model.name"] == mpnet["paths.encoder"] == "assets/all-mpnet-base-v2"
    assert mpnet["components.transformer.model.precision"] == "auto"


def test_evaluate_without_components_times_the_parser_on_the_same_weights(trained_model):
    """evaluate --without: the pipeline's parser alone (the speed cost of the other heads), the same
    parses; a component the pipeline lacks is refused by name."""
    from spacy_pairatt.evaluation.parser_eval import evaluate_pipeline

    dev = trained_model.parent.parent / "dev.spacy"
    heads = ["senter", "tagger", "morphologizer", "trainable_lemmatizer"]
    whole = evaluate_pipeline(str(trained_model), str(dev), "gold")
    parser_only = evaluate_pipeline(str(trained_model), str(dev), "gold", without=heads)
    assert whole["pipeline"] == ["transformer", *heads, "pairatt_parser", "pairatt_release_attention"]
    assert parser_only["pipeline"] == ["transformer", "pairatt_parser", "pairatt_release_attention"]
    assert parser_only["scores"]["dep_las"] == whole["scores"]["dep_las"]
    with pytest.raises(ValueError, match="no component 'parser' to leave out"):
        evaluate_pipeline(str(trained_model), str(dev), "gold", without=["parser"])


def test_a_ud_pipeline_built_from_its_config_and_initialised_in_python_pickles(tiny_bert_dir, ewt_block):
    """Its optimizer's learning-rate schedule was a generator ("cannot pickle 'generator' object")."""
    import pickle

    config = spacy.util.load_config(REPO / "configs" / "pipeline_minilm.cfg")
    config["components"]["transformer"]["model"]["name"] = tiny_bert_dir
    config["components"]["trainable_lemmatizer"]["min_tree_freq"] = 1
    config["initialize"]["before_init"] = None
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    docs = list(conllu_to_docs(ewt_block.read_text(encoding="utf8"), n_sents=10, no_print=True))
    nlp.initialize(lambda: [Example(nlp.make_doc(doc.text), doc) for doc in docs])
    copy = pickle.loads(pickle.dumps(nlp))
    assert copy.pipe_names == nlp.pipe_names and len(copy("A test of the copy .")) == 6
