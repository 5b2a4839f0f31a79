"""The fused eager self-attention against Hugging Face's: same outputs, attention weights and
gradients, for BERT, RoBERTa and MPNet (relative position bias), with padding, in training
(dropout) and at inference."""

import copy

import pytest
import torch
from transformers import BertConfig, BertModel, MPNetConfig, MPNetModel, RobertaConfig, RobertaModel

from spacy_pairatt.layers.fused_attention import (
    FusedBertSelfAttention,
    FusedMPNetSelfAttention,
    FusedRobertaSelfAttention,
    fuse_self_attention,
)

SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=100)


def encoders(model_class, config_class, dropout: float):
    """(original, fused) copies of one random eager encoder."""
    torch.manual_seed(0)
    config = config_class(**SIZES, attention_probs_dropout_prob=dropout, hidden_dropout_prob=dropout)
    original = model_class._from_config(config, attn_implementation="eager")
    fused = copy.deepcopy(original)
    assert fuse_self_attention(fused) == config.num_hidden_layers
    return original, fused


def padded_batch():
    ids = torch.randint(5, 100, (3, 9), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(3, 9, dtype=torch.long)
    mask[1, 6:] = 0
    mask[2, 3:] = 0
    return ids, mask


def self_attention(layer):
    """A layer's self-attention module: BERT and RoBERTa's `attention.self`, MPNet's `attention.attn`."""
    return getattr(layer.attention, "self", None) or layer.attention.attn


@pytest.mark.parametrize("model_class,config_class,fused_class", [
    (BertModel, BertConfig, FusedBertSelfAttention),
    (RobertaModel, RobertaConfig, FusedRobertaSelfAttention),
    (MPNetModel, MPNetConfig, FusedMPNetSelfAttention),
])  # fmt: skip
@pytest.mark.parametrize("training", [False, True])
def test_fused_attention_gives_the_original_outputs_weights_and_gradients(
    model_class, config_class, fused_class, training
):
    """Training: dropout 0.1 drawn in the same order (same seed, same masks); the loss reads both the
    last hidden state and the attention weights, so the gradient through them is compared too."""
    original, fused = encoders(model_class, config_class, dropout=0.1)
    assert all(isinstance(self_attention(layer), fused_class) for layer in fused.encoder.layer)
    ids, mask = padded_batch()
    results = []
    for model in (original, fused):
        model.train(training)
        torch.manual_seed(2)
        output = model(input_ids=ids, attention_mask=mask, output_attentions=True)
        weights = torch.linspace(-1, 1, output.attentions[0].numel()).view_as(output.attentions[0])
        loss = output.last_hidden_state.square().sum() + sum((weights * layer).sum() for layer in output.attentions)
        loss.backward()
        results.append((output, {name: p.grad for name, p in model.named_parameters()}))
    (expected, expected_grads), (found, found_grads) = results
    torch.testing.assert_close(found.last_hidden_state, expected.last_hidden_state, atol=1e-5, rtol=1e-5)
    for found_layer, expected_layer in zip(found.attentions, expected.attentions, strict=True):
        torch.testing.assert_close(found_layer, expected_layer, atol=1e-6, rtol=1e-5)
    assert found_grads.keys() == expected_grads.keys()
    for name, gradient in expected_grads.items():
        torch.testing.assert_close(found_grads[name], gradient, atol=1e-4, rtol=1e-4, msg=name)


@pytest.mark.parametrize("model_class,config_class", [(BertModel, BertConfig), (MPNetModel, MPNetConfig)])
def test_fused_attention_hands_what_it_does_not_fuse_to_the_original(model_class, config_class):
    """A head mask (and, the same way, cross-attention, a cache, BERT's relative positions) takes the
    original forward: same outputs, the masked head's weights zero."""
    original, fused = encoders(model_class, config_class, dropout=0.0)
    ids, mask = padded_batch()
    head_mask = torch.ones(2, 4)
    head_mask[1, 2] = 0
    with torch.no_grad():
        expected, found = (
            model(input_ids=ids, attention_mask=mask, head_mask=head_mask, output_attentions=True)
            for model in (original.eval(), fused.eval())
        )
    torch.testing.assert_close(found.last_hidden_state, expected.last_hidden_state)
    assert float(found.attentions[1][:, 2].abs().sum()) == 0.0


def test_fuse_leaves_other_attention_and_the_weights_alone():
    """An SDPA encoder is not changed; fusing keeps every parameter and the state dict's keys."""
    torch.manual_seed(0)
    sdpa = BertModel._from_config(BertConfig(**SIZES), attn_implementation="sdpa")
    assert fuse_self_attention(sdpa) == 0
    original, fused = encoders(BertModel, BertConfig, dropout=0.0)
    assert list(fused.state_dict()) == list(original.state_dict())
    for name, value in original.state_dict().items():
        assert torch.equal(fused.state_dict()[name], value)


@pytest.mark.parametrize("model_class,config_class", [(BertModel, BertConfig), (MPNetModel, MPNetConfig)])
def test_under_bfloat16_autocast_the_attention_weights_are_computed_in_float32(model_class, config_class):
    """Under autocast the projections run in bfloat16 and the scores, softmax and weighted sum in
    float32: the weights come out float32, close to the float32 forward's, and gradients reach every
    parameter (but the unused pooler's)."""
    original, fused = encoders(model_class, config_class, dropout=0.0)
    ids, mask = padded_batch()
    reference = original(input_ids=ids, attention_mask=mask, output_attentions=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = fused(input_ids=ids, attention_mask=mask, output_attentions=True)
    assert {a.dtype for a in ours.attentions} == {torch.float32}
    difference = max((a - b).abs().max().item() for a, b in zip(ours.attentions, reference.attentions))
    assert 0 < difference < 0.02  # bfloat16 products did run, the weights stay close
    (ours.last_hidden_state.float().sum() + sum(a.sum() for a in ours.attentions)).backward()
    without = [name for name, p in fused.named_parameters() if p.grad is None and "pooler" not in name]
    assert not without
