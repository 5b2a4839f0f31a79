"""A spacy-transformers TransformerModel whose backprop also runs through the attention weights.

spacy-transformers fine-tunes a shared transformer through `last_hidden_state` only: its output
converter backpropagates that one tensor, its component sums one gradient per listener output
and its listeners send only that. A listener that reads the attention weights as features (the
parser's a_ij, a_ji) therefore treats them as constants. Here:

- `build_attention_transformer` (`spacy-pairatt.AttentionTransformerModel.v1`): the stock
  `TransformerModel`, built the same way, with an output converter that backpropagates the
  gradient of every layer's attention as well;
- `build_transformer_model` (`spacy-pairatt.TransformerModel.v1`): the stock `TransformerModel`
  with a `precision` setting (float32, bfloat16, or auto: bfloat16 where the processor has it);
  `spacy-pairatt.AttentionTransformerModel.v2` is v1 with the same setting (layers/precision.py);
- `TransformerDataListener` (`spacy-pairatt.TransformerDataListener.v1`): the stock listener, which
  also tells its model whether the upstream component of the current batch takes attention
  gradients, so that they are only computed when they reach the transformer.

The gradient travels as `FullTransformerBatch.unsplit_by_doc` builds it from per-Doc lists of
arrays: output_0 is d last_hidden_state and output_{1+l}, when present, d attentions of layer l.
The `pairatt_transformer` component builds those lists (spacy_pairatt.components.transformer).
"""

from typing import Callable, List

from spacy.tokens import Doc
from spacy.util import registry
from spacy_transformers.data_classes import FullTransformerBatch, TransformerData
from spacy_transformers.layers import TransformerListener, TransformerModel
from thinc.api import ArgsKwargs, Model
from transformers.file_utils import ModelOutput

from .deprecations import warn_renamed
from .precision import PrecisionHFShim

# The attribute that the component's listener callbacks carry, True when its model is ours.
TAKES_ATTENTION_GRADIENTS = "takes_attention_gradients"


@registry.architectures("spacy-pairatt.TransformerModel.v1")
def build_transformer_model(
    name: str,
    get_spans: Callable,
    tokenizer_config: dict = {},
    transformer_config: dict = {},
    precision: str = "auto",
    mixed_precision: bool = False,
    grad_scaler_config: dict = {},
) -> Model[List[Doc], FullTransformerBatch]:
    """Registered as `spacy-pairatt.TransformerModel.v1`: `spacy-transformers.TransformerModel.v3`
    (same arguments, weights and outputs) whose encoder runs in `precision`.

    precision: "float32"; "bfloat16" (autocast: products in bfloat16, parameters, optimizer state
    and outputs in float32); "auto", bfloat16 on a CPU with native bfloat16 or a CUDA device that
    supports it, float32 elsewhere. `mixed_precision = true` keeps spacy-transformers' float16 on
    CUDA, which takes over there from a bfloat16 precision.
    """
    model = TransformerModel(name, get_spans, tokenizer_config, transformer_config, mixed_precision, grad_scaler_config)
    return in_precision(model, precision, mixed_precision, grad_scaler_config)


@registry.architectures("spacy-pairatt.AttentionTransformerModel.v2")
def build_attention_transformer_in_precision(
    name: str,
    get_spans: Callable,
    tokenizer_config: dict = {},
    transformer_config: dict = {},
    precision: str = "auto",
    mixed_precision: bool = False,
    grad_scaler_config: dict = {},
) -> Model[List[Doc], FullTransformerBatch]:
    """Registered as `spacy-pairatt.AttentionTransformerModel.v2`: `spacy-pairatt.TransformerModel.v1`
    (precision included) whose backprop also takes attention gradients, as v1 does."""
    model = build_attention_transformer(
        name, get_spans, tokenizer_config, transformer_config, mixed_precision, grad_scaler_config
    )
    return in_precision(model, precision, mixed_precision, grad_scaler_config)


@registry.architectures("spacy-pairatt.AttentionTransformerModel.v1")
def build_attention_transformer(
    name: str,
    get_spans: Callable,
    tokenizer_config: dict = {},
    transformer_config: dict = {},
    mixed_precision: bool = False,
    grad_scaler_config: dict = {},
) -> Model[List[Doc], FullTransformerBatch]:
    """Registered as `spacy-pairatt.AttentionTransformerModel.v1`: `spacy-transformers.TransformerModel.v3`
    (same arguments, weights and outputs) whose backprop also takes attention gradients.

    The transformer must output attentions (transformer_config: output_attentions = true,
    attn_implementation = "eager") for listeners to send their gradients.
    """
    model = TransformerModel(name, get_spans, tokenizer_config, transformer_config, mixed_precision, grad_scaler_config)
    model.layers[0].attrs["convert_outputs"] = convert_outputs_with_attentions
    model.attrs["backprops_attentions"] = True
    return model


def in_precision(
    model: TransformerModel, precision: str, mixed_precision: bool, grad_scaler_config: dict
) -> TransformerModel:
    """`model` with its encoder shim replaced by a PrecisionHFShim of the same settings."""
    wrapper = model.layers[0]
    wrapper.shims[0] = PrecisionHFShim(
        wrapper.shims[0]._hfmodel,
        mixed_precision=mixed_precision,
        grad_scaler_config=dict(grad_scaler_config),
        precision=precision,
    )
    return model


def backprops_attentions(model: Model) -> bool:
    """Whether a transformer component's model is one of ours, able to take attention gradients."""
    return bool(model.attrs.get("backprops_attentions", False))


def convert_outputs_with_attentions(model: Model, inputs_outputs, is_train: bool):
    """The HFWrapper output converter: the Hugging Face output as it is, and a backprop that pairs
    the gradients (output_0, output_1, ...) with (last_hidden_state, attentions of layer 0, ...).

    With only output_0, what the stock component sends, it is the stock converter.
    """
    _, model_output = inputs_outputs

    def backprop(d_model_output: ModelOutput) -> ArgsKwargs:
        d_tensors = tuple(d_model_output.values())
        outputs = (model_output.last_hidden_state, *(model_output.get("attentions") or ()))
        if len(d_tensors) > len(outputs):
            raise ValueError(
                f"AttentionTransformerModel: got {len(d_tensors)} gradients for {len(outputs)} outputs "
                "(last_hidden_state and one attention tensor per layer); attention gradients need "
                'transformer_config output_attentions = true and attn_implementation = "eager"'
            )
        return ArgsKwargs(args=(outputs[: len(d_tensors)],), kwargs={"grad_tensors": d_tensors})

    return model_output, backprop


class TransformerDataListener(TransformerListener):
    """spacy-transformers' listener (raw per-Doc TransformerData), which can tell whether the
    upstream component of the received batch takes attention gradients."""

    @property
    def upstream_takes_attention_gradients(self) -> bool:
        return getattr(self._backprop, TAKES_ATTENTION_GRADIENTS, False)


@registry.architectures("spacy-pairatt.TransformerDataListener.v1")
def build_transformer_data_listener(upstream: str = "*") -> Model[List[Doc], List[TransformerData]]:
    """The raw per-Doc TransformerData of the upstream transformer, for the pair scorers.

    Unlike `spacy-transformers.TransformerListener.v1`, it does not pool to token vectors, so
    the attention maps and the wordpiece alignment reach the parser; and it says whether the
    upstream transformer takes attention gradients.
    """
    return TransformerDataListener(upstream_name=upstream)


@registry.architectures("spacy-pairatt.TransformerListener.v1")
def build_transformer_listener(upstream: str = "*") -> Model[List[Doc], List[TransformerData]]:
    """Deprecated name of `spacy-pairatt.TransformerDataListener.v1`."""
    warn_renamed("spacy-pairatt.TransformerListener.v1", "spacy-pairatt.TransformerDataListener.v1")
    return build_transformer_data_listener(upstream)
