"""Token vectors for the tagging heads: the transformer's states beside the token's own spelling.

all-MiniLM-L6-v2 is uncased: "The" and "the", "This" and "this" reach it as the same wordpieces.
Lemmas ("The" -> "the", but "Air" stays "Air" as a proper noun) and sentence starts (a capital
after a line with no full stop) depend on exactly what it cannot see. So the tagging heads of the UD
pipeline read hashed surface features of each token's text (its shape, first and last letters),
concatenated with the listener's vectors and mixed by a maxout layer, optionally over a window
of neighbouring tokens.
"""

from typing import List, Sequence

import torch
from spacy.ml.models.tok2vec import MaxoutWindowEncoder, MultiHashEmbed
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import (
    ArgsKwargs,
    Dropout,
    Maxout,
    Model,
    PyTorchRNNWrapper,
    chain,
    concatenate,
    torch2xp,
    with_array,
    with_padded,
    xp2torch,
)
from thinc.types import Floats2d, Padded

from ..integration.validation import check_settings


@registry.architectures("spacy-pairatt.SurfaceTok2Vec.v1")
def build_surface_tok2vec(
    tok2vec: Model[List[Doc], List[Floats2d]],
    surface_width: int = 64,
    attrs: Sequence[str] = ("NORM", "PREFIX", "SUFFIX", "SHAPE"),
    rows: Sequence[int] = (5000, 1000, 2500, 1000),
    width: int = 256,
    window_size: int = 1,
) -> Model[List[Doc], List[Floats2d]]:
    """Registered as `spacy-pairatt.SurfaceTok2Vec.v1`.

    tok2vec: the listener (contextual vectors); surface_width: the hashed embedding of `attrs`
    (spaCy token attributes; case survives in PREFIX, SUFFIX and SHAPE), one table of `rows[i]`
    rows per attribute; width: the maxout layer over both; window_size: tokens on each side a
    second maxout layer sees (0: none), so a sentence start can read the token before it.
    """
    check_settings("spacy-pairatt.SurfaceTok2Vec.v1", width=width, window_size=window_size)
    surface = surface_embedding("spacy-pairatt.SurfaceTok2Vec.v1", surface_width, attrs, rows)
    model = chain(concatenate(handing_on_no_input_gradient(tok2vec), surface), with_array(surface_mix(width)))
    if window_size:
        model = chain(model, MaxoutWindowEncoder(width=width, window_size=window_size, maxout_pieces=3, depth=1))
    return model


def surface_embedding(
    owner: str, surface_width: int, attrs: Sequence[str], rows: Sequence[int]
) -> Model[List[Doc], List[Floats2d]]:
    """The hashed embedding of the token attributes `attrs`, one table of `rows[i]` rows each."""
    check_settings(owner, surface_width=surface_width)
    if len(attrs) != len(rows):
        raise ValueError(f"{owner}: attrs {list(attrs)} and rows {list(rows)} must have one table size per attribute")
    return MultiHashEmbed(width=surface_width, attrs=list(attrs), rows=list(rows), include_static_vectors=False)


def surface_mix(width: int) -> Model[Floats2d, Floats2d]:
    """The maxout layer that mixes the listener's vectors with the spelling features."""
    return Maxout(width, nP=3, normalize=True)


def handing_on_no_input_gradient(layer: Model[List[Doc], List[Floats2d]]) -> Model[List[Doc], List[Floats2d]]:
    """`layer`, whose backprop returns [] for the Docs, and whose output for an empty Doc is (0, width).

    thinc's `concatenate` adds up its layers' input gradients; spacy-transformers' listener returns
    None for them (its gradient reaches the transformer through a callback), which cannot be added
    to the hash embedding's []. It also gives an empty Doc a (0, 0) array, which `concatenate`
    cannot stack with the other Docs' (n, width) ones. Module-level functions, so the model pickles.
    """
    return Model(f"no_input_gradient({layer.name})", _no_input_gradient_forward, layers=[layer], init=_init_wrapped)


def _init_wrapped(model: Model, X=None, Y=None) -> None:
    model.layers[0].initialize(X=X, Y=Y)


def _no_input_gradient_forward(model: Model, docs: List[Doc], is_train: bool):
    layer = model.layers[0]
    outputs, backprop = layer(docs, is_train)
    width = layer.maybe_get_dim("nO") or next((output.shape[1] for output in outputs if len(output)), None)
    if width:
        outputs = [model.ops.alloc2f(0, width) if not len(output) else output for output in outputs]
    return outputs, _BackpropToNothing(backprop)


class _BackpropToNothing:
    """The wrapped layer's backprop, returning [] for the Docs (a class, not a closure: picklable)."""

    def __init__(self, backprop):
        self.backprop = backprop

    def __call__(self, d_outputs: List[Floats2d]) -> List:
        self.backprop(d_outputs)
        return []


@registry.architectures("spacy-pairatt.DropoutBiLSTMEncoder.v1")
def build_dropout_bilstm_encoder(width: int = 256, depth: int = 1) -> Model[List[Floats2d], List[Floats2d]]:
    """Registered as `spacy-pairatt.DropoutBiLSTMEncoder.v1`: a BiLSTM (`width` in and out, half of it
    per direction) with dropout on its input and its output, each Doc read alone.

    For the segmenters: a sentence start often depends on words further away than a window reaches
    (a quote after a full stop, a greeting line before a name). The dropout layers take their rate
    from spaCy's `training.dropout`, which sets every Dropout layer of a model being trained; a
    depth-1 LSTM has none inside it. The layers and weights are those of spaCy's `BiLSTMEncoder`
    (pipelines trained with it load unchanged), but its LSTM reads each Doc within its own length
    (`LengthAwareLSTM`), not the batch padded to its longest Doc.
    """
    check_settings("spacy-pairatt.DropoutBiLSTMEncoder.v1", width=width, depth=depth)
    if width % 2:
        raise ValueError(f"spacy-pairatt.DropoutBiLSTMEncoder.v1: width must be even (half per direction), got {width}")
    lstm = PyTorchRNNWrapper(
        LengthAwareLSTM(width, width // 2, depth, bidirectional=True), convert_inputs=padded_with_lengths
    )
    lstm.set_dim("nO", width)
    lstm.set_dim("nI", width)
    return chain(Dropout(), with_padded(with_padded(lstm)), Dropout())


class LengthAwareLSTM(torch.nn.LSTM):
    """torch's LSTM over a padded batch, each sequence read within its own length.

    Over the padded batch as it is, a Doc's backward direction starts at the batch's last padded step,
    not at its own last token, so its vectors, and the sentence starts read from them, would depend on
    which other Docs it was batched with (`nlp(text)` and `nlp.pipe(texts)` disagreed on 74 of EWT
    test's 25,098 tokens with the standalone segmenter). Here the backward direction runs over each
    sequence reversed within its length, so every Doc gets what it gets alone; padding rows are zeros.
    Each direction of each layer is one fused LSTM over the padded batch: on a CPU, torch's LSTM over
    packed sequences (`pack_padded_sequence`), which gives the same, took 30 times as long backwards
    (2 layers of 64 a direction, 8 Docs of up to 1,500 tokens: 7 s against 0.2 s). The parameters are
    `torch.nn.LSTM`'s, so saved weights load as they are.
    """

    def forward(self, padded: torch.Tensor, lengths: torch.Tensor):
        steps = torch.arange(padded.shape[0], device=padded.device).unsqueeze(1)  # (T, 1)
        lengths = lengths.to(padded.device)
        inside = steps < lengths  # (T, B): a Doc's own steps
        # the step each of a Doc's steps comes from when it is read backwards (padding stays where it is)
        reversed_steps = torch.where(inside, lengths - 1 - steps, steps)
        outputs = padded
        for layer in range(self.num_layers):
            if layer and self.dropout and self.training:
                outputs = torch.nn.functional.dropout(outputs, self.dropout)
            directions = [self._one_direction(layer, "", outputs)]
            if self.bidirectional:
                backwards = self._one_direction(layer, "_reverse", in_steps(outputs, reversed_steps))
                directions.append(in_steps(backwards, reversed_steps))
            outputs = torch.cat(directions, dim=-1)
        return outputs * inside.unsqueeze(-1), None

    def _one_direction(self, layer: int, suffix: str, inputs: torch.Tensor) -> torch.Tensor:
        """One direction of one layer, forwards over `inputs`: a one-layer LSTM run with this layer's weights."""
        names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh") if self.bias else ("weight_ih", "weight_hh")
        weights = {f"{name}_l0": getattr(self, f"{name}_l{layer}{suffix}") for name in names}
        return torch.func.functional_call(self._layer_template(inputs.shape[-1]), weights, (inputs,))[0]

    def _layer_template(self, width: int) -> torch.nn.LSTM:
        """A one-layer, one-direction LSTM of `width` inputs whose weights functional_call replaces; kept
        out of the module's parameters and state (not a submodule)."""
        templates = self.__dict__.setdefault("_layer_templates", {})
        if width not in templates:
            templates[width] = torch.nn.LSTM(width, self.hidden_size, 1, bias=self.bias)
        return templates[width]


def in_steps(sequences: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
    """`sequences` (T, B, W) with each row t of sequence b taken from row steps[t, b]."""
    return sequences.gather(0, steps.unsqueeze(-1).expand(-1, -1, sequences.shape[-1]))


def padded_with_lengths(model: Model, Xp: Padded, is_train: bool):
    """`LengthAwareLSTM`'s inputs from thinc's Padded batch: its data and each sequence's length."""
    inputs = xp2torch(Xp.data, requires_grad=is_train, device=model.shims[0].device)
    lengths = torch.as_tensor(Xp.lengths, dtype=torch.int64)

    def backprop(d_inputs: ArgsKwargs) -> Padded:
        return Padded(torch2xp(d_inputs.args[0]), Xp.size_at_t, Xp.lengths, Xp.indices)

    return ArgsKwargs(args=(inputs, lengths), kwargs={}), backprop
