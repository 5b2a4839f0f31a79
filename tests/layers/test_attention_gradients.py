"""Fine-tuning through attention: the AttentionTransformerModel backprop,
and pairatt_transformer + pairatt_parser pipelines that send attention gradients to the encoder."""

import numpy as np
import pytest
import torch
from spacy.util import fix_random_seed, load_config, load_model_from_config
from spacy_transformers.data_classes import TransformerData
from thinc.api import Adam
from transformers.file_utils import ModelOutput

from spacy_pairatt.integration.span_getters import make_sent_windows
from spacy_pairatt.layers.attention_transformer import build_attention_transformer
from spacy_pairatt.layers.pair_scorer import torch_module
from tests.conftest import REPO, examples_from_docs

FTATT_CONFIG = REPO / "configs" / "parser_minilm_ftatt.cfg"
# spacy-transformers' TransformerModel.v3 with a precision: what the configs name
STOCK_ARCHITECTURE = "spacy-pairatt.TransformerModel.v1"
TAGGER = {
    "model": {
        "@architectures": "spacy.Tagger.v2",
        "tok2vec": {
            "@architectures": "spacy-transformers.TransformerListener.v1",
            "grad_factor": 1.0,
            "pooling": {"@layers": "reduce_mean.v1"},
            "upstream": "*",
        },
    }
}


def test_backprop_through_attentions_matches_finite_differences(tiny_bert_dir):
    """The gradient of a scalar loss of the attention outputs (and the last hidden state) reaches
    the encoder weights: it matches torch autograd and finite differences of that loss."""
    import spacy

    nlp = spacy.blank("en")
    docs = [nlp.make_doc(text) for text in ("The cat sat on the mat.", "Dogs bark at night.", "Hello")]
    model = build_attention_transformer(
        tiny_bert_dir,
        make_sent_windows(window=64, stride=32),
        {"use_fast": True},
        {
            "output_attentions": True,
            "attn_implementation": "eager",
            "hidden_dropout_prob": 0.0,
            "attention_probs_dropout_prob": 0.0,
        },
    )
    model.initialize(X=docs)
    hf_model = model.transformer.double()  # finite differences need float64
    trf_full, backprop = model.begin_update(docs)
    rng = np.random.default_rng(0)
    d_docs = [
        [rng.normal(size=data.model_output.last_hidden_state.shape)]
        + [rng.normal(size=layer.shape) for layer in data.model_output.attentions]
        for data in trf_full.doc_data
    ]

    def loss(full_output) -> float:
        outputs = (full_output.last_hidden_state, *full_output.attentions)
        d_full = trf_full.unsplit_by_doc(d_docs).model_output.values()
        return sum(float((output.detach() * d_output).sum()) for output, d_output in zip(outputs, d_full))

    hf_model.zero_grad()
    backprop(trf_full.unsplit_by_doc(d_docs))
    query = hf_model.encoder.layer[0].attention.self.query.weight
    embeddings = hf_model.embeddings.word_embeddings.weight
    grads = {"query": query.grad.clone(), "embeddings": embeddings.grad.clone()}
    # torch autograd on the same wordpieces gives the same gradient.
    wordpieces = trf_full.wordpieces
    inputs = {
        "input_ids": torch.as_tensor(wordpieces.input_ids),
        "attention_mask": torch.as_tensor(wordpieces.attention_mask),
        "token_type_ids": torch.as_tensor(wordpieces.token_type_ids),
    }
    hf_model.zero_grad()
    output = hf_model(**inputs)
    d_full = list(trf_full.unsplit_by_doc(d_docs).model_output.values())
    torch.autograd.backward((output.last_hidden_state, *output.attentions), d_full)
    torch.testing.assert_close(query.grad, grads["query"])
    torch.testing.assert_close(embeddings.grad, grads["embeddings"])
    # Finite differences on the query weights of layer 0, which only act through attention.
    eps = 1e-6
    for row, col in zip(*np.unravel_index(np.argsort(-grads["query"].abs().numpy(), axis=None)[:4], query.shape)):
        with torch.no_grad():
            original = query[row, col].item()
            query[row, col] = original + eps
            plus = loss(hf_model(**inputs))
            query[row, col] = original - eps
            minus = loss(hf_model(**inputs))
            query[row, col] = original
        assert grads["query"][row, col].item() == pytest.approx((plus - minus) / (2 * eps), rel=1e-4)
    # With attention gradients only, the encoder still gets a gradient (through attention alone).
    hf_model.zero_grad()
    trf_full, backprop = model.begin_update(docs)
    backprop(trf_full.unsplit_by_doc([[np.zeros_like(d[0]), *d[1:]] for d in d_docs]))
    assert query.grad.abs().sum() > 0


def attention_only_pipeline(encoder: str, architecture: str, tagger: bool = False):
    """configs/parser_minilm_ftatt.cfg on the tiny encoder, scorer on attention features only."""
    overrides = {
        "components.transformer.model.name": encoder,
        "components.transformer.model.@architectures": architecture,
        "components.transformer.model.get_spans.window": 64,
        "components.transformer.model.get_spans.stride": 32,
        "components.pairatt_parser.model.pair_scorer.use_embeddings": False,
    }
    nlp = load_model_from_config(load_config(FTATT_CONFIG, overrides=overrides), auto_fill=True)
    if tagger:
        nlp.add_pipe("tagger", config=TAGGER)
    return nlp


def initialized(nlp, docs):
    """Initialized pipeline and its examples; the attention maps get random weights, because at
    their zero initialization no gradient can flow through them to the encoder."""
    fix_random_seed(0)
    examples = examples_from_docs(nlp, docs)
    nlp.initialize(lambda: examples)
    module = torch_module(nlp.get_pipe("pairatt_parser").model.get_ref("pair_scorer")).scorer
    with torch.no_grad():
        module.attention.forward_map.normal_()
        module.attention.backward_map.normal_()
    return examples


def encoder_weights(nlp):
    return {name: p.detach().clone() for name, p in nlp.get_pipe("transformer").model.transformer.named_parameters()}


def with_gradient(nlp):
    """Encoder weights with a non-zero gradient waiting for the optimizer."""
    parameters = nlp.get_pipe("transformer").model.transformer.named_parameters()
    return sorted(name for name, p in parameters if p.grad is not None and bool(p.grad.any()))


def changed(before, after):
    return sorted(name for name in before if not torch.equal(before[name], after[name]))


def test_attention_only_parser_fine_tunes_the_encoder(tiny_bert_dir, ud_train_docs):
    """One update sends the attention-only parser's gradient into the encoder weights; spaCy
    applies a shared transformer's gradient at the next update's finish_update."""
    nlp = attention_only_pipeline(tiny_bert_dir, "spacy-pairatt.AttentionTransformerModel.v2")
    examples = initialized(nlp, ud_train_docs[:6])
    before = encoder_weights(nlp)
    optimizer = Adam(1e-3)
    losses = nlp.update(examples, sgd=optimizer)
    assert losses["transformer"] > 0  # the squared norm of the gradients it received
    pending = with_gradient(nlp)
    assert "embeddings.word_embeddings.weight" in pending
    assert "encoder.layer.0.attention.self.query.weight" in pending
    # The last layer's values and feed-forward only reach the hidden states, which the parser ignores.
    assert "encoder.layer.1.output.dense.weight" not in pending
    nlp.update(examples, sgd=optimizer)
    assert set(pending) <= set(changed(before, encoder_weights(nlp)))


def test_stock_architecture_ignores_attention_gradients(tiny_bert_dir, ud_train_docs):
    """Under the stock TransformerModel (TransformerModel.v3, with a precision) the parser computes no
    attention gradient: an attention-only parser leaves the encoder as it is, and the documented error
    is raised if a listener sends attention gradients anyway."""
    nlp = attention_only_pipeline(tiny_bert_dir, STOCK_ARCHITECTURE)
    examples = initialized(nlp, ud_train_docs[:6])
    before = encoder_weights(nlp)
    optimizer = Adam(1e-3)
    for _ in range(2):
        nlp.update(examples, sgd=optimizer)
        assert with_gradient(nlp) == []
    assert changed(before, encoder_weights(nlp)) == []

    transformer = nlp.get_pipe("transformer")
    transformer.update(examples[:2])
    listener = nlp.get_pipe("pairatt_parser").model.get_ref("tok2vec")
    assert not listener.upstream_takes_attention_gradients
    outputs = listener._outputs
    gradients = [
        TransformerData(
            wordpieces=data.wordpieces,
            model_output=ModelOutput(
                last_hidden_state=np.zeros_like(data.model_output.last_hidden_state),
                attentions=[np.zeros_like(layer) for layer in data.model_output.attentions],
            ),
            align=data.align,
        )
        for data in outputs
    ]
    with pytest.raises(ValueError, match="AttentionTransformerModel"):
        listener.backprop_and_clear(gradients)


def test_stock_listener_tagger_trains_alongside(tiny_bert_dir, ud_train_docs):
    """A tagger on spacy-transformers' own listener, the last listener, shares the encoder with the
    attention-only parser: its d last_hidden_state is added to the parser's attention gradients
    in one backprop, and it learns."""
    nlp = attention_only_pipeline(tiny_bert_dir, "spacy-pairatt.AttentionTransformerModel.v2", tagger=True)
    examples = initialized(nlp, ud_train_docs[:4])
    assert nlp.get_pipe("transformer").listening_components == ["pairatt_parser", "tagger"]
    optimizer = Adam(3e-2)
    tagger_losses = []
    for _ in range(6):
        losses = nlp.update(examples, sgd=optimizer)
        tagger_losses.append(losses["tagger"])
    pending = with_gradient(nlp)
    assert "encoder.layer.1.output.dense.weight" in pending  # only the tagger's gradient reaches it
    assert tagger_losses[-1] < 0.7 * tagger_losses[0]
    docs = list(nlp.pipe(eg.reference.text for eg in examples[:2]))
    assert all(token.tag_ for doc in docs for token in doc)


def test_config_differs_from_the_stock_one_only_in_the_architecture():
    stock = load_config(REPO / "configs" / "parser_minilm.cfg")
    ftatt = load_config(FTATT_CONFIG)
    assert ftatt["components"]["transformer"]["model"]["@architectures"] == (
        "spacy-pairatt.AttentionTransformerModel.v2"
    )
    ftatt["components"]["transformer"]["model"]["@architectures"] = STOCK_ARCHITECTURE
    assert ftatt == stock
    assert FTATT_CONFIG.read_text().startswith("#")
