"""The thinc side of the pair scorer: config, lazy construction, numpy <-> torch conversion."""

from dataclasses import dataclass, replace
from typing import Callable, Tuple

import numpy as np
import torch
from thinc.api import ArgsKwargs, Model, PyTorchWrapper_v2, get_torch_default_device, xp2torch

from ..features import PairBatch
from .torch_scorers import BiaffinePairScorer, PaperPairScorer, RelationPairScorer

SCORER_MODES = ("paper", "biaffine")


def build_pair_scorer(
    mode: str = "biaffine",
    use_embeddings: bool = True,
    use_attention: bool = True,
    arc_width: int = 256,
    label_width: int = 128,
    dropout: float = 0.1,
) -> Model[PairBatch, np.ndarray]:
    """Registered as `spacy-pairatt.PairScorer.v1`: scores (B, N, N, 1 + K) for a PairBatch.

    mode "paper" is Meng et al.'s eq. 5 (one linear layer, NONE + K classes per pair); "biaffine"
    is Dozat & Manning's arc and label scorer with the attention terms added. The flags make the
    paper's ablation rows (emb, att, emb+att) configs. Dimensions nI (hidden width), nA (layers x
    heads) and nO (1 + labels) are set by the component before `initialize`.
    """
    if mode not in SCORER_MODES:
        raise ValueError(f"PairScorer mode must be one of {SCORER_MODES}, got {mode!r}")
    return _scorer_model(
        mode, use_embeddings, use_attention, dropout, {"arc_width": arc_width, "label_width": label_width}
    )


def build_relation_scorer(
    use_embeddings: bool = True, use_attention: bool = True, hidden_width: int = 256, dropout: float = 0.1
) -> Model[PairBatch, np.ndarray]:
    """Registered as `spacy-pairatt.RelationScorer.v1`: (B, N, N, 1 + K) NONE + relation scores.

    An MLP over head and tail entity vectors, the [CLS] context vector and the attention between
    the two entities in both directions; the flags make the emb / emb+att rows configs.
    """
    return _scorer_model("relation", use_embeddings, use_attention, dropout, {"hidden_width": hidden_width})


def _scorer_model(mode: str, use_embeddings: bool, use_attention: bool, dropout: float, widths: dict) -> Model:
    if not (use_embeddings or use_attention):
        raise ValueError("A pair scorer needs use_embeddings or use_attention (or both) to be true")
    return Model(
        "pair_scorer",
        forward,
        init=init,
        dims={"nI": None, "nA": None, "nO": None},
        attrs={"mode": mode, "use_embeddings": use_embeddings, "use_attention": use_attention, "dropout": dropout}
        | widths,
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
        module = BiaffinePairScorer(**common, arc_width=attrs["arc_width"], label_width=attrs["label_width"])
    model._layers.append(PyTorchWrapper_v2(module, convert_inputs=_batch_to_torch, convert_outputs=_scores_to_xp))


@dataclass
class ArcScores:
    """What the biaffine scorer returns at inference: arc scores now, label scores on demand.

    arcs: (B, N, N, 1), channel 0 of the training-time scores; labels_at(heads) gives the
    (B, N, K) label scores of the arcs heads[b, i] -> i, so labels are scored only on decoded arcs.
    """

    arcs: np.ndarray
    labels_at: Callable[[np.ndarray], np.ndarray]


def forward(model: Model, batch: PairBatch, is_train: bool):
    if is_train or model.attrs["mode"] != "biaffine":
        return model.layers[0](batch, is_train)
    return _predict_arcs(model, batch), _no_backprop


def _no_backprop(d_scores):
    raise ValueError("the inference-time biaffine scores have no gradient: call the scorer with is_train=True")


def _predict_arcs(model: Model, batch: PairBatch) -> ArcScores:
    module = model.layers[0].shims[0]._model
    module.eval()  # the wrapper is bypassed here, so dropout is switched off here too
    with torch.no_grad():
        inputs, _ = _batch_to_torch(model, batch, is_train=False)
        arcs, state = module.arc_scores(*inputs.args)

    def labels_at(heads: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return _to_numpy(module.label_scores_at(state, torch.as_tensor(heads, device=arcs.device)))

    return ArcScores(_to_numpy(arcs)[..., None], labels_at)


def _to_numpy(tensor) -> np.ndarray:
    return tensor.detach().cpu().numpy()


def _batch_to_torch(model: Model, batch: PairBatch, is_train: bool):
    """The batch is numpy (alignment runs on the CPU); the scorer runs on torch's default device.

    The backprop gives a PairBatch of gradients: hidden (zeros when the scorer does not use the
    embeddings) and, when batch.attention_requires_grad, attention (else None).
    """
    device = get_torch_default_device()
    hidden = xp2torch(batch.hidden, requires_grad=is_train, device=device)
    attention = None
    if batch.attention is not None:
        attention = xp2torch(batch.attention, requires_grad=is_train and batch.attention_requires_grad, device=device)
    args = (hidden, attention, xp2torch(batch.missing, device=device), xp2torch(batch.unshared, device=device))

    def grads_to_batch(d_args: ArgsKwargs) -> PairBatch:
        d_hidden, d_attention = d_args.args[:2]
        d_hidden = np.zeros_like(batch.hidden) if d_hidden is None else _to_numpy(d_hidden)
        if batch.attention_requires_grad:
            d_attention = np.zeros_like(batch.attention) if d_attention is None else _to_numpy(d_attention)
        return replace(batch, hidden=d_hidden, attention=d_attention)

    return ArgsKwargs(args=args, kwargs={}), grads_to_batch


def _scores_to_xp(model: Model, inputs_outputs: Tuple, is_train: bool):
    _, scores = inputs_outputs

    def scores_grad_to_torch(d_scores: np.ndarray) -> ArgsKwargs:
        return ArgsKwargs(args=(scores,), kwargs={"grad_tensors": (xp2torch(d_scores, device=scores.device),)})

    return _to_numpy(scores), scores_grad_to_torch
