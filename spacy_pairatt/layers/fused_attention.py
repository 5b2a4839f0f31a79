"""Eager self-attention in fewer passes, for the BERT and RoBERTa encoders whose attention the
parser reads.

Attention weights are only returned by the eager implementation (SDPA fuses them away), and
Hugging Face's eager BERT self-attention makes a pass over the (B, H, P, P) scores for each of a
matmul on permuted views, the division by sqrt(d), the mask's addition and the softmax, after
three linear maps. Here one linear map gives Q, K and V, one `baddbmm` gives the scaled scores with
the mask added, then the softmax and one `bmm`. Same outputs to float rounding (tests compare both
forwards and gradients with the original); what it gains is bench/speed.py's (a) against (a0)
(results/bench.md). Whatever else the original supports (cross-attention, a key/value cache,
relative positions, head masks) goes to it.
"""

import math
from typing import Optional

import torch
from torch import nn
from transformers.models.bert.modeling_bert import BertSelfAttention
from transformers.models.roberta.modeling_roberta import RobertaSelfAttention


class FusedSelfAttentionMixin:
    """`forward` of an eager `BertSelfAttention`-like module in fewer passes (module docstring)."""

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        head_mask: Optional[torch.Tensor] = None,
        encoder_hidden_states: Optional[torch.Tensor] = None,
        encoder_attention_mask: Optional[torch.Tensor] = None,
        past_key_value=None,
        output_attentions: bool = False,
    ):
        if (
            attention_mask is None
            or head_mask is not None
            or encoder_hidden_states is not None
            or past_key_value is not None
            or self.is_decoder
            or self.position_embedding_type != "absolute"
        ):
            return super().forward(
                hidden_states,
                attention_mask,
                head_mask,
                encoder_hidden_states,
                encoder_attention_mask,
                past_key_value,
                output_attentions,
            )
        batch, width, _ = hidden_states.shape
        n_heads, head_size = self.num_attention_heads, self.attention_head_size
        weight = torch.cat([self.query.weight, self.key.weight, self.value.weight])
        bias = torch.cat([self.query.bias, self.key.bias, self.value.bias])
        qkv = nn.functional.linear(hidden_states, weight, bias).view(batch, width, 3, n_heads, head_size)
        query, key, value = (part.reshape(batch * n_heads, width, head_size) for part in qkv.permute(2, 0, 3, 1, 4))
        mask = attention_mask.expand(batch, n_heads, attention_mask.shape[-2], width)
        mask = mask.reshape(batch * n_heads, -1, width)
        scores = torch.baddbmm(mask, query, key.transpose(1, 2), alpha=1 / math.sqrt(head_size))
        probs = self.dropout(torch.softmax(scores, dim=-1))
        context = torch.bmm(probs, value).view(batch, n_heads, width, head_size).transpose(1, 2)
        context = context.reshape(batch, width, self.all_head_size)
        return (context, probs.view(batch, n_heads, width, width)) if output_attentions else (context,)


class FusedBertSelfAttention(FusedSelfAttentionMixin, BertSelfAttention):
    pass


class FusedRobertaSelfAttention(FusedSelfAttentionMixin, RobertaSelfAttention):
    pass


FUSED_CLASSES = {BertSelfAttention: FusedBertSelfAttention, RobertaSelfAttention: FusedRobertaSelfAttention}


def fuse_self_attention(model: nn.Module) -> int:
    """Give every eager BERT / RoBERTa self-attention module of `model` the fused forward, in
    place (same parameters, so state dicts and saved weights are unchanged); returns how many.
    Modules of other classes (SDPA, other architectures) are left as they are."""
    fused = 0
    for module in model.modules():
        replacement = FUSED_CLASSES.get(type(module))
        if replacement is not None:
            module.__class__ = replacement
            fused += 1
    return fused
