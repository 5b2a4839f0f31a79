"""pairatt_frozen_transformer: the encoder runs once per distinct training sentence and never learns."""

import numpy as np
import pytest
import spacy

from spacy_pairatt.components.attention_release import AttentionRelease
from spacy_pairatt.layers.pair_batch import sentence_features
from tests.conftest import examples_from_docs, make_transformer_pipeline

N_DOCS = 8


def frozen_pipeline(encoder, **options):
    """blank English + pairatt_frozen_transformer (conftest's transformer config) with `options`."""
    template = make_transformer_pipeline(encoder, span_window=16, factory="pairatt_frozen_transformer")
    config = {key: value for key, value in template.config["components"]["transformer"].items() if key != "factory"}
    nlp = spacy.blank("en")
    nlp.add_pipe("pairatt_frozen_transformer", name="transformer", config={**config, **options})
    return nlp


def torch_parameters(model):
    """Copies of the weights of every PyTorch module inside a thinc model (encoder and scorer alike)."""
    return {
        (shim.id, name): value.detach().clone()
        for node in model.walk()
        for shim in node.shims
        for name, value in shim._model.named_parameters()
    }


@pytest.fixture
def docs(ud_train_docs):
    """EWT sentences of mixed lengths: encoded together, their windows are padded."""
    return sorted(ud_train_docs[:N_DOCS], key=len)


@pytest.fixture
def nlp(tiny_bert_dir, docs):
    nlp = frozen_pipeline(tiny_bert_dir)
    nlp.initialize(lambda: examples_from_docs(nlp, docs))
    return nlp


def count_encoded(monkeypatch, component):
    """A list that records how many Docs each call of the component's predict encodes."""
    calls = []
    predict = component.predict

    def counting_predict(docs):
        calls.append(len(docs))
        return predict(docs)

    monkeypatch.setattr(component, "predict", counting_predict)
    return calls


def train_pass(nlp, docs):
    """One update of the transformer on fresh Docs, as the corpus reader makes them each epoch."""
    examples = examples_from_docs(nlp, docs)
    nlp.get_pipe("transformer").update(examples)
    return [eg.predicted._.trf_data for eg in examples]


def outputs(trf_data):
    output = trf_data.model_output
    return [output["last_hidden_state"], *output["attentions"]]


def word_features(docs, trf_datas):
    features, _ = sentence_features(docs, trf_datas, use_attention=True)
    return features


def test_second_pass_over_recreated_docs_reads_the_cache(nlp, docs, monkeypatch):
    calls = count_encoded(monkeypatch, nlp.get_pipe("transformer"))
    first = train_pass(nlp, docs)
    assert sum(calls) == N_DOCS
    second = train_pass(nlp, docs)
    assert sum(calls) == N_DOCS
    assert len(nlp.get_pipe("transformer").cache) == N_DOCS
    for before, after in zip(first, second):
        assert after is not before
        for array_before, array_after in zip(outputs(before), outputs(after)):
            assert array_after.dtype == np.float32
            np.testing.assert_array_equal(array_before, array_after)


def test_cached_windows_give_the_parser_the_features_of_the_inference_path(nlp, docs):
    """The cache cuts each Doc's windows to its own length; the word-level features do not change."""
    cached = train_pass(nlp, docs)
    inferred = [doc._.trf_data for doc in nlp.get_pipe("transformer").pipe(docs)]
    widths = [[data.model_output["last_hidden_state"].shape[1] for data in datas] for datas in (cached, inferred)]
    assert sum(widths[0]) < sum(widths[1])
    for cached_units, inferred_units in zip(word_features(docs, cached), word_features(docs, inferred)):
        np.testing.assert_allclose(cached_units.hidden, inferred_units.hidden, atol=1e-5)
        np.testing.assert_allclose(cached_units.attention, inferred_units.attention, atol=1e-6)


def test_float16_cache_returns_float32_within_tolerance(tiny_bert_dir, nlp, docs):
    half = frozen_pipeline(tiny_bert_dir, cache_dtype="float16")
    half.initialize()
    full_outputs, half_outputs = train_pass(nlp, docs), train_pass(half, docs)
    stored = next(iter(half.get_pipe("transformer").cache.values()))
    assert stored.model_output["last_hidden_state"].dtype == np.float16
    assert half.get_pipe("transformer").cache_nbytes < 0.6 * nlp.get_pipe("transformer").cache_nbytes
    for full_data, half_data in zip(full_outputs, half_outputs):
        for array_full, array_half in zip(outputs(full_data), outputs(half_data)):
            assert array_half.dtype == np.float32
            np.testing.assert_allclose(array_half, array_full, rtol=2e-3, atol=1e-3)


def test_updates_train_the_parser_and_not_the_encoder(tiny_bert_dir, docs):
    nlp = frozen_pipeline(tiny_bert_dir)
    nlp.add_pipe("pairatt_parser")
    examples = examples_from_docs(nlp, docs)
    optimizer = nlp.initialize(lambda: examples)
    encoder, parser = nlp.get_pipe("transformer").model, nlp.get_pipe("pairatt_parser").model
    encoder_before, parser_before = torch_parameters(encoder), torch_parameters(parser)
    for _ in range(3):
        losses = nlp.update(examples_from_docs(nlp, docs), sgd=optimizer)
    assert losses["pairatt_parser"] > 0 and losses["transformer"] == 0
    encoder_after, parser_after = torch_parameters(encoder), torch_parameters(parser)
    assert len(encoder_after) > 10 and all(encoder_before[key].equal(encoder_after[key]) for key in encoder_before)
    assert any(not parser_before[key].equal(parser_after[key]) for key in parser_before)


def test_full_cache_stops_caching_and_still_annotates(tiny_bert_dir, docs, monkeypatch):
    nlp = frozen_pipeline(tiny_bert_dir, max_cached_docs=3)
    nlp.initialize()
    calls = count_encoded(monkeypatch, nlp.get_pipe("transformer"))
    train_pass(nlp, docs)
    assert len(nlp.get_pipe("transformer").cache) == 3
    second = train_pass(nlp, docs)
    assert len(nlp.get_pipe("transformer").cache) == 3
    assert sum(calls) == N_DOCS + N_DOCS - 3
    assert all(len(data.align.lengths) == len(doc) for data, doc in zip(second, docs))


def test_releasing_or_changing_a_docs_attention_leaves_the_cache_intact(nlp, docs):
    examples = examples_from_docs(nlp, docs)
    nlp.get_pipe("transformer").update(examples)
    first = [[array.copy() for array in outputs(eg.predicted._.trf_data)] for eg in examples]
    release = AttentionRelease()
    for eg in examples:
        for array in outputs(eg.predicted._.trf_data):
            array[...] = 0.0
        release(eg.predicted)
        assert "attentions" not in eg.predicted._.trf_data.model_output
    for before, data in zip(first, train_pass(nlp, docs)):
        for array_before, array_after in zip(before, outputs(data)):
            np.testing.assert_array_equal(array_before, array_after)


def test_inference_does_not_fill_the_cache(nlp, docs):
    list(nlp.get_pipe("transformer").pipe(docs))
    assert nlp.get_pipe("transformer").cache == {}


def test_listing_it_in_annotating_components_is_refused(tiny_bert_dir):
    nlp = frozen_pipeline(tiny_bert_dir)
    config = nlp.config
    config["training"]["annotating_components"] = ["transformer"]
    nlp.config = config
    with pytest.raises(ValueError, match="annotating_components"):
        nlp.initialize()


@pytest.mark.parametrize("config", [{"cache_dtype": "bfloat16"}, {"max_cached_docs": -1}])
def test_bad_options_are_refused(tiny_bert_dir, config):
    with pytest.raises(ValueError, match=next(iter(config))):
        frozen_pipeline(tiny_bert_dir, **config)
