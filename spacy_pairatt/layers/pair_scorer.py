"""The thinc side of the pair scorer: config, lazy construction, the batch in and the scores out.

The scorer's torch module pools each chunk from the transformer's windows itself
(`torch_scorers.PooledPairScorer`), so the windows stay on their device and only the scores go
to the host; with the biaffine scorer these are the arc scores and the label scores of one arc
per word (the gold arc in training, the decoded one at inference).
"""

from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple, Union

import numpy as np
import torch
from spacy.util import registry
from thinc.api import ArgsKwargs, Model, PyTorchWrapper_v2, xp2torch
from thinc.types import Floats4d

from .deprecations import warn_renamed
from .pair_batch import PairBatch
from .torch_scorers import BiaffinePairScorer, PaperPairScorer, PooledPairScorer, RelationPairScorer
from .unit_scoring import WindowGradients

SCORER_MODES = ("paper", "biaffine")


@dataclass
class ArcScores:
    """What the biaffine scorer returns: arc scores now, label scores on demand.

    arcs: (B, N, N, 1); labels_at(heads) gives the (B, N, K) label scores of the arcs
    heads[b, i] -> i (units with heads[b, i] = -1 get zeros): the gold arcs in training, the decoded
    arcs at inference. The backprop of begin_update takes (d_arcs, d_labels): the gradient of
    `arcs` and of what the last labels_at call returned (d_labels None if it was not called).
    """

    arcs: np.ndarray
    labels_at: Callable[[np.ndarray], np.ndarray]


# What a pair scorer returns for one chunk: (B, N, N, 1 + K) scores (PaperPairScorer.v1,
# RelationScorer.v1) or ArcScores (BiaffinePairScorer.v1); and the gradient its backprop takes:
# d scores, or (d arcs, d labels of the last labels_at call or None).
PairScores = Union[Floats4d, ArcScores]
PairScoresGradient = Union[Floats4d, Tuple[np.ndarray, Optional[np.ndarray]]]


@registry.architectures("spacy-pairatt.PaperPairScorer.v1")
def build_paper_pair_scorer(
    use_embeddings: bool = True, use_attention: bool = True, dropout: float = 0.1
) -> Model[PairBatch, Floats4d]:
    """(B, N, N, 1 + K) NONE + label scores per (dependent, head) pair: Meng et al.'s eq. 5, one
    linear layer over the pair's features. The flags make the paper's ablation rows (emb, att,
    emb+att) configs. Dimensions nI (hidden width), nA (layers x heads) and nO (1 + labels) are set
    by the component before `initialize`.
    """
    from ..integration.validation import check_settings

    check_settings("spacy-pairatt.PaperPairScorer.v1", dropout=dropout)
    return _scorer_model("paper", use_embeddings, use_attention, dropout, {})


@registry.architectures("spacy-pairatt.BiaffinePairScorer.v1")
def build_biaffine_pair_scorer(
    use_embeddings: bool = True,
    use_attention: bool = True,
    arc_width: int = 256,
    label_width: int = 128,
    dropout: float = 0.1,
    label_attention: bool = True,
) -> Model[PairBatch, ArcScores]:
    """ArcScores: Dozat & Manning's arc and label scorer with the attention terms added; the arcs
    scored at once, the labels of given arcs on demand. Dimensions as `PaperPairScorer.v1`.
    label_attention false (with use_attention true): attention in the arc scores only, the labels
    from the hidden states alone; reading the attention at every decoded arc is a tenth of a parse.
    """
    from ..integration.validation import check_settings

    check_settings("spacy-pairatt.BiaffinePairScorer.v1", arc_width=arc_width, label_width=label_width, dropout=dropout)
    settings = {"arc_width": arc_width, "label_width": label_width, "label_attention": label_attention}
    return _scorer_model("biaffine", use_embeddings, use_attention, dropout, settings)


@registry.architectures("spacy-pairatt.PairScorer.v1")
def build_pair_scorer(
    mode: str = "biaffine",
    use_embeddings: bool = True,
    use_attention: bool = True,
    arc_width: int = 256,
    label_width: int = 128,
    dropout: float = 0.1,
) -> Union[Model[PairBatch, Floats4d], Model[PairBatch, ArcScores]]:
    """Deprecated: `PaperPairScorer.v1` (mode "paper") or `BiaffinePairScorer.v1` (mode "biaffine"),
    kept so that configs and saved pipelines naming it load; the widths are ignored in mode "paper".
    """
    from ..integration.validation import check_settings

    check_settings("spacy-pairatt.PairScorer.v1", arc_width=arc_width, label_width=label_width, dropout=dropout)
    if mode not in SCORER_MODES:
        raise ValueError(f"PairScorer mode must be one of {SCORER_MODES}, got {mode!r}")
    if mode == "paper":
        warn_renamed("spacy-pairatt.PairScorer.v1 (mode paper)", "spacy-pairatt.PaperPairScorer.v1")
        return _scorer_model("paper", use_embeddings, use_attention, dropout, {})
    warn_renamed("spacy-pairatt.PairScorer.v1 (mode biaffine)", "spacy-pairatt.BiaffinePairScorer.v1")
    return build_biaffine_pair_scorer(use_embeddings, use_attention, arc_width, label_width, dropout)


@registry.architectures("spacy-pairatt.RelationScorer.v1")
def build_relation_scorer(
    use_embeddings: bool = True, use_attention: bool = True, hidden_width: int = 256, dropout: float = 0.1
) -> Model[PairBatch, Floats4d]:
    """(B, N, N, 1 + K) NONE + relation scores.

    An MLP over head and tail entity vectors, the [CLS] context vector and the attention between
    the two entities in both directions; the flags make the emb / emb+att rows configs.
    """
    from ..integration.validation import check_settings

    check_settings("spacy-pairatt.RelationScorer.v1", hidden_width=hidden_width, dropout=dropout)
    return _scorer_model("relation", use_embeddings, use_attention, dropout, {"hidden_width": hidden_width})


def _scorer_model(mode: str, use_embeddings: bool, use_attention: bool, dropout: float, settings: dict) -> Model:
    if not (use_embeddings or use_attention):
        raise ValueError("A pair scorer needs use_embeddings or use_attention (or both) to be true")
    return Model(
        "pair_scorer",
        biaffine_forward if mode == "biaffine" else array_forward,
        init=init,
        dims={"nI": None, "nA": None, "nO": None},
        attrs={"mode": mode, "use_embeddings": use_embeddings, "use_attention": use_attention, "dropout": dropout}
        | settings,
    )


def init(model: Model, X=None, Y=None) -> None:
    """Build the torch module once the dimensions are known; a second call changes nothing."""
    if model.layers:
        return
    attrs = model.attrs
    n_labels = model.get_dim("nO") - 1
    common = dict(
        width=model.get_dim("nI"),
        n_attention=model.get_dim("nA"),
        n_labels=n_labels,
        use_embeddings=attrs["use_embeddings"],
        use_attention=attrs["use_attention"],
        dropout=attrs["dropout"],
    )
    if attrs["mode"] == "paper":
        module = PaperPairScorer(**common)
    elif attrs["mode"] == "relation":
        module = RelationPairScorer(**common, hidden_width=attrs["hidden_width"])
    else:
        widths = {"arc_width": attrs["arc_width"], "label_width": attrs["label_width"]}
        module = BiaffinePairScorer(**common, **widths, label_attention=attrs["label_attention"])
    pooled = PooledPairScorer(module, use_attention=attrs["use_attention"])
    model._layers.append(PyTorchWrapper_v2(pooled, convert_inputs=_batch_to_torch, convert_outputs=_scores_to_xp))


def array_forward(model: Model[PairBatch, Floats4d], batch: PairBatch, is_train: bool):
    """The paper's and the relation scorer's (B, N, N, 1 + K) scores, through the PyTorchWrapper."""
    return model.layers[0](batch, is_train)


def _no_backprop(d_scores):
    raise ValueError("the inference-time biaffine scores have no gradient: call the scorer with is_train=True")


def biaffine_forward(model: Model[PairBatch, ArcScores], batch: PairBatch, is_train: bool):
    """ArcScores and their backprop, the torch module called directly rather than through the
    PyTorchWrapper (one tensor out, one gradient in): the labels are scored in a second call, on arcs
    known only after the arcs are scored (gold ones in the loss, decoded ones at inference)."""
    module = torch_module(model)
    module.train(is_train)  # the wrapper's shim would do this; at inference it switches dropout off
    with torch.set_grad_enabled(is_train):
        inputs, grads_to_windows = _batch_to_torch(model, batch, is_train)
        arcs, state = module(*inputs.args)
    last_labels: List[torch.Tensor] = []

    def labels_at(heads: np.ndarray) -> np.ndarray:
        with torch.set_grad_enabled(is_train):
            labels = module.label_scores_at(state, torch.as_tensor(heads, device=arcs.device))
        last_labels[:] = [labels]
        return _to_numpy(labels)

    if not is_train:
        return ArcScores(_to_numpy(arcs)[..., None], labels_at), _no_backprop

    def backprop(d_scores: Tuple[np.ndarray, Optional[np.ndarray]]) -> WindowGradients:
        d_arcs, d_labels = d_scores
        tensors, gradients = [arcs], [xp2torch(d_arcs[..., 0], device=arcs.device)]
        if d_labels is not None:
            tensors.append(last_labels[0])
            gradients.append(xp2torch(d_labels, device=arcs.device))
        torch.autograd.backward(tensors, gradients)
        hidden, attention = inputs.args[:2]
        d_attention = None if attention is None else [[layer.grad for layer in bucket] for bucket in attention]
        return grads_to_windows(ArgsKwargs(args=([bucket.grad for bucket in hidden], d_attention), kwargs={}))

    return ArcScores(_to_numpy(arcs)[..., None], labels_at), backprop


def torch_module(model: Model) -> PooledPairScorer:
    """The scorer's torch module (pooling + pair scorer), once `init` has built it."""
    return model.layers[0].shims[0]._model


def _to_numpy(tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy()


def _batch_to_torch(model: Model, batch: PairBatch, is_train: bool):
    """The batch's windows (already torch, on the transformer's device) as fresh leaves, and the
    chunk's alignment on the same device.

    The backprop gives WindowGradients: hidden (zeros when the scorer does not use the
    embeddings) and, when batch.attention_requires_grad, attention (else None).
    """
    windows = batch.windows
    hidden = [bucket.detach().requires_grad_(is_train) for bucket in windows.hidden]
    attention = None
    if windows.attention is not None:  # present when the scorer uses attention: a bucket's layers
        needs_grad = is_train and batch.attention_requires_grad
        attention = [[layer.detach().requires_grad_(needs_grad) for layer in bucket] for bucket in windows.attention]
    alignment = batch.alignment.to_torch(hidden[0].device)

    def grads_to_windows(d_args: ArgsKwargs) -> WindowGradients:
        d_hidden, d_attention = d_args.args[:2]
        d_hidden = _or_zeros(hidden, d_hidden)
        if not batch.attention_requires_grad:
            return WindowGradients(d_hidden)
        return WindowGradients(d_hidden, [_or_zeros(bucket, d) for bucket, d in zip(attention, d_attention)])

    return ArgsKwargs(args=(hidden, attention, alignment, windows.projected), kwargs={}), grads_to_windows


def _or_zeros(tensors: List[torch.Tensor], grads: Optional[List[Optional[torch.Tensor]]]) -> List[torch.Tensor]:
    """The gradients of `tensors`, zeros where autograd left one None (a tensor the scores did not read)."""
    grads = [None] * len(tensors) if grads is None else grads
    return [torch.zeros_like(tensor) if grad is None else grad for tensor, grad in zip(tensors, grads)]


def _scores_to_xp(model: Model, inputs_outputs: Tuple, is_train: bool):
    _, scores = inputs_outputs

    def scores_grad_to_torch(d_scores: np.ndarray) -> ArgsKwargs:
        return ArgsKwargs(args=(scores,), kwargs={"grad_tensors": (xp2torch(d_scores, device=scores.device),)})

    return _to_numpy(scores), scores_grad_to_torch
