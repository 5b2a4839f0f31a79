"""The transformer's `precision` (layers/precision.py): which dtype each setting autocasts to on which
processor, float32 outputs and parameters under bfloat16, no process-wide switch, training, and a
pipeline saved in one precision loaded and parsed in the other."""

import warnings

import numpy as np
import pytest
import spacy
import torch
from spacy.util import load_config
from spacy_transformers.layers.hf_shim import HFShim

from spacy_pairatt.layers import precision
from spacy_pairatt.layers.precision import (
    as_float32,
    autocast_dtype,
    check_precision,
    cpu_has_native_bfloat16,
    precision_overrides,
)
from tests.conftest import UD_DIR, examples_from_docs, make_transformer_pipeline, read_conllu_sentences


@pytest.fixture
def cpu_capabilities(monkeypatch):
    """Set what torch.cpu.get_capabilities reports; the cached answers are dropped around the test."""

    def set_capabilities(**features):
        monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"architecture": "x86_64", **features})
        cpu_has_native_bfloat16.cache_clear()
        precision.warn_emulated_bfloat16.cache_clear()

    yield set_capabilities
    cpu_has_native_bfloat16.cache_clear()
    precision.warn_emulated_bfloat16.cache_clear()


@pytest.mark.parametrize(
    "features,native",
    [
        ({"avx512_bf16": True, "amx_bf16": False}, True),
        ({"avx512_bf16": False, "amx_bf16": True}, True),
        ({"avx512_bf16": False, "amx_bf16": False, "avx512_f": True}, False),
        ({}, False),
    ],
)
def test_native_bfloat16_is_read_from_the_cpu_features(cpu_capabilities, features, native):
    cpu_capabilities(**features)
    assert cpu_has_native_bfloat16() is native


def test_auto_is_bfloat16_only_on_a_cpu_with_native_bfloat16(cpu_capabilities):
    cpu_capabilities(avx512_bf16=True)
    assert autocast_dtype("auto", "cpu") is torch.bfloat16
    assert autocast_dtype("float32", "cpu") is None
    cpu_capabilities(avx512_bf16=False, avx512_f=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # auto falls back without a word
        assert autocast_dtype("auto", "cpu") is None


def test_bfloat16_asked_for_on_an_emulating_cpu_runs_and_warns_once(cpu_capabilities):
    cpu_capabilities(avx512_bf16=False)
    with pytest.warns(UserWarning, match="without native bfloat16") as caught:
        assert autocast_dtype("bfloat16", "cpu") is torch.bfloat16
        assert autocast_dtype("bfloat16", "cpu") is torch.bfloat16
    assert len([w for w in caught if "bfloat16" in str(w.message)]) == 1


def test_an_unknown_precision_is_refused_in_one_line():
    with pytest.raises(ValueError, match="'float16' is not one of 'float32', 'bfloat16', 'auto'"):
        check_precision("float16")


def test_as_float32_casts_every_floating_tensor_and_keeps_the_graph():
    hidden = torch.ones(2, 3, dtype=torch.bfloat16, requires_grad=True)
    output = {
        "last_hidden_state": hidden * 2,
        "attentions": (hidden * 3, hidden * 4),
        "ids": torch.ones(2, dtype=torch.long),
    }
    cast = as_float32(output)
    assert cast["last_hidden_state"].dtype == torch.float32
    assert [a.dtype for a in cast["attentions"]] == [torch.float32, torch.float32]
    assert cast["ids"].dtype == torch.long
    cast["last_hidden_state"].sum().backward()
    assert hidden.grad is not None and float(hidden.grad.float().sum()) == 12.0


def tiny_parser(encoder: str, setting: str):
    nlp = make_transformer_pipeline(encoder, precision=setting)
    nlp.add_pipe("pairatt_parser")
    return nlp


@pytest.fixture(scope="module")
def ud_docs():
    return read_conllu_sentences(UD_DIR / "en_ewt-ud-dev.conllu", 24)


def test_bfloat16_encoder_outputs_float32_close_to_float32(tiny_bert_dir, ud_docs):
    """Same weights, two precisions: float32 arrays reach the parser, close to the float32 ones,
    and no autocast or default dtype is left switched on in the process."""
    texts = [doc.text for doc in ud_docs]
    nlp = tiny_parser(tiny_bert_dir, "float32")
    nlp.initialize(lambda: examples_from_docs(nlp, ud_docs))
    reference = [doc._.trf_data.model_output for doc in nlp.pipe(texts)]
    nlp_bf16 = tiny_parser(tiny_bert_dir, "bfloat16")
    nlp_bf16.from_bytes(nlp.to_bytes())
    outputs = [doc._.trf_data.model_output for doc in nlp_bf16.pipe(texts)]
    assert not torch.is_autocast_enabled("cpu") and torch.get_default_dtype() == torch.float32
    for ours, theirs in zip(outputs, reference):
        assert ours.last_hidden_state.dtype == np.float32 and ours.attentions[0].dtype == np.float32
        assert np.allclose(ours.last_hidden_state, theirs.last_hidden_state, atol=0.1)
        assert not np.array_equal(ours.last_hidden_state, theirs.last_hidden_state)  # bfloat16 did run
        assert np.abs(ours.attentions[0] - theirs.attentions[0]).max() < 0.02


def test_training_in_bfloat16_keeps_float32_parameters_and_loads_in_float32(tiny_bert_dir, ud_docs, tmp_path):
    """A few bfloat16 updates lower the loss with float32 weights; the saved pipeline loads with
    precision float32 given at load time and parses (one tree per sentence)."""
    nlp = tiny_parser(tiny_bert_dir, "bfloat16")
    examples = examples_from_docs(nlp, ud_docs)
    optimizer = nlp.initialize(lambda: examples)
    losses = [nlp.update(examples, sgd=optimizer, losses={})["pairatt_parser"] for _ in range(6)]
    assert losses[-1] < losses[0]
    encoder = nlp.get_pipe("transformer").model.transformer
    assert {p.dtype for p in encoder.parameters()} == {torch.float32}
    nlp.to_disk(tmp_path / "bf16")
    override = {"components": {"transformer": {"model": {"precision": "float32"}}}}
    loaded = spacy.load(tmp_path / "bf16", config=override)
    assert loaded.config["components"]["transformer"]["model"]["precision"] == "float32"
    assert loaded.get_pipe("transformer").model.layers[0].shims[0].precision == "float32"
    for doc in loaded.pipe(doc.text for doc in ud_docs):
        for sent in doc.sents:
            assert sum(token.head == token for token in sent) == 1


def test_a_pipeline_saved_before_the_setting_runs_in_bfloat16_from_a_load_time_override(
    tiny_bert_dir, ud_docs, tmp_path
):
    """A transformer saved with spacy-transformers' TransformerModel.v3 (no precision) takes
    spacy-pairatt.TransformerModel.v1 and a precision at load time: same weights, bfloat16 run."""
    nlp = make_transformer_pipeline(tiny_bert_dir)
    nlp.initialize(lambda: examples_from_docs(nlp, ud_docs))
    nlp.to_disk(tmp_path / "stock")
    override = precision_overrides(load_config(tmp_path / "stock" / "config.cfg"), "bfloat16")
    loaded = spacy.load(tmp_path / "stock", config=override)
    assert loaded.get_pipe("transformer").model.layers[0].shims[0].precision == "bfloat16"
    text = ud_docs[0].text
    ours, theirs = loaded(text)._.trf_data.model_output, nlp(text)._.trf_data.model_output
    assert np.allclose(ours.last_hidden_state, theirs.last_hidden_state, atol=0.1)
    assert not np.array_equal(ours.last_hidden_state, theirs.last_hidden_state)


def autocast_each_call(shim, docs_batch):
    """The transformer's outputs as autocast alone gives them, each weight cast on this call."""
    with precision.precision_context(shim.precision, shim.device):
        return as_float32(HFShim.predict(shim, docs_batch))


def encoder_inputs(nlp, texts, monkeypatch):
    """The ArgsKwargs that the transformer's shim is called with for `texts`."""
    shim = nlp.get_pipe("transformer").model.layers[0].shims[0]
    calls = []
    monkeypatch.setattr(shim, "predict", lambda inputs: calls.append(inputs) or HFShim.predict(shim, inputs))
    nlp.get_pipe("transformer").model.predict([nlp.make_doc(text) for text in texts])
    monkeypatch.undo()
    return calls[0]


def test_kept_bfloat16_weights_give_what_autocast_gives_and_follow_the_weights(tiny_bert_dir, ud_docs, monkeypatch):
    """Prediction keeps the linear weights' bfloat16 copies between calls: its outputs are autocast's
    to the bit, and a training step, weights copied in, or a load shows in the next prediction, as it
    does without the copies."""
    nlp = tiny_parser(tiny_bert_dir, "bfloat16")
    examples = examples_from_docs(nlp, ud_docs)
    optimizer = nlp.initialize(lambda: examples)
    shim = nlp.get_pipe("transformer").model.layers[0].shims[0]
    inputs = encoder_inputs(nlp, [doc.text for doc in ud_docs[:8]], monkeypatch)

    def same_as_autocast():
        ours, theirs = shim.predict(inputs), autocast_each_call(shim, inputs)
        assert torch.equal(ours.last_hidden_state, theirs.last_hidden_state)
        assert all(torch.equal(a, b) for a, b in zip(ours.attentions, theirs.attentions))
        return ours.last_hidden_state

    before = same_as_autocast()
    initial_weights = {name: tensor.clone() for name, tensor in shim._model.state_dict().items()}
    kept = shim.bfloat_weights.get(shim._model, torch.bfloat16)
    assert {t.dtype for t in kept.values()} == {torch.bfloat16} and all("embeddings" not in name for name in kept)
    assert shim.bfloat_weights.get(shim._model, torch.bfloat16) is kept  # unchanged weights: the same copies
    for _ in range(2):  # thinc's optimizer writes the weights through numpy, which torch does not see
        nlp.update(examples, sgd=optimizer, losses={})
    trained = same_as_autocast()
    assert not torch.equal(trained, before)
    trained_weights = {name: tensor.clone() for name, tensor in shim._model.state_dict().items()}
    shim._model.load_state_dict(initial_weights)  # copied in place, as thinc's use_params swaps weights
    assert torch.equal(same_as_autocast(), before)
    shim._model.load_state_dict(trained_weights)
    assert torch.equal(same_as_autocast(), trained)
    nlp.get_pipe("transformer").from_bytes(nlp.get_pipe("transformer").to_bytes())
    shim = nlp.get_pipe("transformer").model.layers[0].shims[0]
    assert torch.equal(same_as_autocast(), trained)
