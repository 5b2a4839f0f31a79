"""Settings checked at construction, the transformer output a component reads, and dev corpora
checked before training."""

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc, DocBin
from spacy_transformers.data_classes import TransformerData, WordpieceBatch
from thinc.api import Config
from transformers.file_utils import ModelOutput

from spacy_pairatt.integration.validation import (
    ATTENTION_CONFIG_HINT,
    check_settings,
    transformer_output_problem,
    transformer_ran,
    validate_dev_corpus,
    validate_parser_dev_corpus,
)


@pytest.mark.parametrize(
    "architecture, settings, key",
    [
        ("spacy-pairatt.BiaffinePairScorer.v1", {"arc_width": 0}, "arc_width"),
        ("spacy-pairatt.BiaffinePairScorer.v1", {"label_width": 0}, "label_width"),
        ("spacy-pairatt.PaperPairScorer.v1", {"dropout": 1.0}, "dropout"),
        ("spacy-pairatt.PairScorer.v1", {"arc_width": 0}, "arc_width"),
        ("spacy-pairatt.PairScorer.v1", {"arc_width": -5}, "arc_width"),
        ("spacy-pairatt.PairScorer.v1", {"label_width": 0}, "label_width"),
        ("spacy-pairatt.PairScorer.v1", {"dropout": 1.0}, "dropout"),
        ("spacy-pairatt.PairScorer.v1", {"dropout": -0.1}, "dropout"),
        ("spacy-pairatt.RelationScorer.v1", {"hidden_width": -1}, "hidden_width"),
        ("spacy-pairatt.RelationScorer.v1", {"dropout": float("nan")}, "dropout"),
        ("spacy-pairatt.PairAttParserModel.v1", {"grad_factor": -1.0}, "grad_factor"),
        ("spacy-pairatt.PairAttParserModel.v1", {"max_pairs_per_chunk": 0}, "max_pairs_per_chunk"),
        ("spacy-pairatt.PairAttParser.v1", {"grad_factor": -1.0}, "grad_factor"),
        ("spacy-pairatt.PairAttParser.v1", {"max_pairs_per_chunk": 0}, "max_pairs_per_chunk"),
        ("spacy-pairatt.PairAttRelations.v1", {"grad_factor": -0.5}, "grad_factor"),
        ("spacy-pairatt.PairAttRelations.v1", {"max_pairs_per_chunk": -3}, "max_pairs_per_chunk"),
    ],
)
def test_registered_functions_refuse_bad_numbers_naming_the_key(architecture, settings, key):
    build = spacy.registry.architectures.get(architecture)
    if architecture == "spacy-pairatt.PairAttParser.v1":
        settings = {"tok2vec": None, "scorer": None, **settings}  # checked before the layers are used
    elif architecture in ("spacy-pairatt.PairAttParserModel.v1", "spacy-pairatt.PairAttRelations.v1"):
        settings = {"tok2vec": None, "pair_scorer": None, **settings}
    with pytest.raises(ValueError, match=rf"^{architecture}: {key} must be "):
        build(**settings)


def test_good_numbers_pass():
    check_settings("x", arc_width=1, label_width=64, hidden_width=np.int64(8), dropout=0.0, grad_factor=0.0)
    check_settings("x", max_pairs_per_chunk=1, threshold=1.0, negative_ratio=None)
    with pytest.raises(ValueError, match="x: arc_width must be an integer >= 1, got 2.5"):
        check_settings("x", arc_width=2.5)
    with pytest.raises(ValueError, match="x: threshold must be a number in"):
        check_settings("x", threshold=True)


def test_settings_in_a_pipeline_config_fail_when_the_pipeline_is_built():
    nlp = spacy.blank("en")
    with pytest.raises(ValueError, match="spacy-pairatt.RelationScorer.v1: hidden_width must be an integer >= 1"):
        nlp.add_pipe("pairatt_rel", config={"model": {"pair_scorer": {"hidden_width": 0}}})
    with pytest.raises(ValueError, match="spacy-pairatt.BiaffinePairScorer.v1: label_width must be an integer >= 1"):
        nlp.add_pipe("pairatt_parser", config={"model": {"pair_scorer": {"label_width": 0}}})
    with pytest.raises(ValueError, match="spacy-pairatt.PairAttParserModel.v1: grad_factor must be a number >= 0"):
        nlp.add_pipe("pairatt_parser", config={"model": {"grad_factor": -1}})
    with pytest.raises(ValueError, match=r"pairatt_rel: threshold must be a number in \[0, 1\], got 1.5"):
        nlp.add_pipe("pairatt_rel", config={"threshold": 1.5})
    with pytest.raises(ValueError, match="pairatt_rel: negative_ratio must be null"):
        nlp.add_pipe("pairatt_rel", config={"negative_ratio": -1.0})
    assert nlp.pipe_names == []


def transformer_data(strings, attentions: bool) -> TransformerData:
    """Output of a 2-layer, 2-head transformer on one window holding the given wordpieces."""
    n = len(strings)
    rng = np.random.default_rng(0)
    output = {"last_hidden_state": rng.random((1, n, 4), dtype="float32")}
    if attentions:
        output["attentions"] = [rng.random((1, 2, n, n), dtype="float32") for _ in range(2)]
    wordpieces = WordpieceBatch(
        strings=[strings],
        input_ids=np.arange(n)[None],
        attention_mask=np.ones((1, n), dtype="bool"),
        lengths=[n],
        token_type_ids=None,
    )
    lengths = np.array([1] * (n - 2), dtype="i")
    from thinc.api import Ragged

    return TransformerData(wordpieces, ModelOutput(output), Ragged(np.arange(1, n - 1, dtype="i"), lengths))


def test_transformer_that_did_not_run_is_told_apart_from_one_without_attention():
    did_not_run = [None, TransformerData.empty(), TransformerData.zeros(5, 32)]
    for trf_data in did_not_run:
        assert not transformer_ran(trf_data)
        for use_attention in (True, False):
            problem = transformer_output_problem(trf_data, use_attention)
            assert problem.startswith("Doc._.trf_data is empty: the transformer did not run on this Doc")
            assert "select_pipes" in problem and "output_attentions" not in problem
    without_attention = transformer_data(["[CLS]", "paris", "is", "[SEP]"], attentions=False)
    assert transformer_ran(without_attention)
    problem = transformer_output_problem(without_attention, use_attention=True)
    assert problem.startswith("Doc._.trf_data has no attention weights") and problem.endswith(ATTENTION_CONFIG_HINT)
    assert transformer_output_problem(without_attention, use_attention=False) is None
    assert transformer_output_problem(transformer_data(["[CLS]", "x", "[SEP]"], attentions=True), True) is None
    zero_but_real = transformer_data(["[CLS]", "x", "[SEP]"], attentions=False)
    zero_but_real.model_output["last_hidden_state"][:] = 0
    assert transformer_ran(zero_but_real), "all-zero hidden states alone do not make the listener's stand-in"


TRAINING_CONFIG = """
[paths]
train = null
dev = {dev}

[nlp]
lang = "en"
pipeline = []

[components]

[corpora]

[corpora.dev]
@readers = "spacy.Corpus.v1"
path = ${{paths.dev}}

[corpora.train]
@readers = "spacy.Corpus.v1"
path = ${{paths.dev}}

[training]
dev_corpus = "corpora.dev"
train_corpus = "corpora.train"
"""


def pipeline_with_dev_corpus(dev_path) -> spacy.Language:
    config = Config().from_str(TRAINING_CONFIG.format(dev=f'"{dev_path}"'), interpolate=False)
    return spacy.util.load_model_from_config(config, auto_fill=True)


def test_dev_corpus_empty_or_without_heads_or_with_a_broken_tree(tmp_path):
    vocab = spacy.blank("en").vocab
    empty = tmp_path / "empty.spacy"
    DocBin().to_disk(empty)
    message = rf"pairatt_parser: the dev corpus \[corpora.dev\] \({empty}\) has no examples"
    with pytest.raises(ValueError, match=message):
        validate_parser_dev_corpus(pipeline_with_dev_corpus(empty))

    no_heads = tmp_path / "no_heads.spacy"
    DocBin(docs=[Doc(vocab, words=["Just", "words", "."])]).to_disk(no_heads)
    with pytest.raises(ValueError, match="no example of the dev corpus .* has gold heads"):
        validate_parser_dev_corpus(pipeline_with_dev_corpus(no_heads))

    cycle = tmp_path / "cycle.spacy"
    good = Doc(vocab, words=["It", "works", "."], heads=[1, 1, 1], deps=["nsubj", "ROOT", "punct"])
    bad = Doc(vocab, words=["A", "b", "c"], heads=[1, 0, 1], deps=["x", "y", "ROOT"])
    DocBin(docs=[good, bad]).to_disk(cycle)
    with pytest.raises(ValueError, match=r"example 1 of the dev corpus \[corpora.dev\] .* invalid gold parse"):
        validate_parser_dev_corpus(pipeline_with_dev_corpus(cycle))

    fine = tmp_path / "fine.spacy"
    DocBin(docs=[good]).to_disk(fine)
    where, examples = validate_dev_corpus(pipeline_with_dev_corpus(fine), "x")
    assert where == f"[corpora.dev] ({fine})" and len(examples) == 1
    validate_parser_dev_corpus(pipeline_with_dev_corpus(fine))


def test_no_dev_corpus_to_check_outside_a_training_config():
    assert validate_dev_corpus(spacy.blank("en"), "x") is None


def test_spacy_train_initialization_checks_the_parsers_dev_corpus(tmp_path, tiny_bert_dir):
    """`spacy train` initializes with the config's dev corpus at hand: an empty one stops it there
    (it would score 0.00 at every evaluation); a default path with no file behind it is not checked."""
    from spacy.training.initialize import init_nlp

    from tests.conftest import REPO

    vocab = spacy.blank("en").vocab
    good = Doc(vocab, words=["It", "works", "."], heads=[1, 1, 1], deps=["nsubj", "ROOT", "punct"])
    DocBin(docs=[good]).to_disk(tmp_path / "train.spacy")
    DocBin().to_disk(tmp_path / "empty.spacy")

    def init(dev):
        overrides = {
            "paths.train": str(tmp_path / "train.spacy"),
            "paths.dev": str(dev),
            "components.transformer.model.name": tiny_bert_dir,
        }
        return init_nlp(spacy.util.load_config(REPO / "configs" / "parser_minilm.cfg", overrides=overrides))

    empty = tmp_path / "empty.spacy"
    with pytest.raises(
        ValueError, match=rf"pairatt_parser: the dev corpus \[corpora.dev\] \({empty}\) has no examples"
    ):
        init(empty)
    assert "pairatt_parser" in init(tmp_path / "not_converted_yet.spacy").pipe_names
