"""Tree marginals: how probable each arc is under the distribution over single-root dependency trees.

Conventions (Koo et al. 2007, "Structured prediction models via the matrix-tree theorem"):

* One sentence of ``n`` words is an ``(n, n)`` log-score matrix; row ``i`` is the *dependent*,
  column ``j`` the *head*, ``scores[i, j]`` the log-score of the arc ``j -> i`` and the diagonal
  ``scores[i, i]`` the log-score of word ``i`` being the root. ``-inf`` (or a very negative score)
  marks an impossible arc.
* A tree's probability is ``exp(sum of its arcs' scores - log Z)``, over the trees with exactly
  one root: the trees the MST decoder returns.
* Batches are ``(B, n, n)`` with ``lengths`` (B,): sentence b is ``scores[b, :lengths[b], :lengths[b]]``.

Everything runs in float64 torch, in log space: each dependent's row is shifted by its maximum
before exponentiating (the shift multiplies every tree's weight by the same factor, so it leaves
the marginals unchanged and enters log Z as a sum), so large scores do not overflow and a row's
small entries are not flushed against another row's large ones. An arc more than LOG_FLOOR (500)
below its row's best counts as LOG_FLOOR below it (float64 holds nothing under e^-745). That
changes nothing unless the tree constraint forces such an arc, which needs a row spread over 500
nats: a trained parser's rows spread over at most about 40 (EWT dev, temperature-scaled).

The fast path is LAPACK's LU (one determinant and inverse per sentence, O(n^3)). A Laplacian
entry is a sum of weights, and where a group of words is tied to the rest of the tree only by
weights e^-40 below their own arcs, that sum rounds them away and LU returns garbage or a zero
determinant. Sentences whose Laplacian is that ill-conditioned (|K| |K^-1| over CONDITION_LIMIT)
are redone by `_eliminated_log_det`, Gaussian elimination that never subtracts (the Laplacian
kept as off-diagonal weights plus each row's slack), with the marginals from its gradient: exact
to about 1e-13 for any score spread, but a Python loop over the words, so only for those
sentences (a trained parser's scores are far from the limit). NaN marginals and log Z only where
no single-root tree has any weight; a word with no possible head at all is a ValueError. The
functions are differentiable by autograd.

The decoder (`decoding.py`) and the parser's scores put the root at unit 0 instead:
`root_first_to_diagonal` and `diagonal_to_root_first` convert between the two layouts.
"""

from typing import Dict, Optional, Tuple, Union

import numpy as np
import torch
from scipy.special import logsumexp

from .layout import NEG_INF

ArrayLike = Union[np.ndarray, torch.Tensor]
LOG_FLOOR = 500.0
# |K|_inf |K^-1|_max above this: LU's relative error may exceed about 1e-8; use the exact elimination.
CONDITION_LIMIT = 1e8


def _as_batch(scores: ArrayLike, lengths: Optional[ArrayLike]) -> Tuple[torch.Tensor, torch.Tensor, bool]:
    """(B, n, n) float64 tensor, (B,) lengths, and whether the input was one unbatched sentence."""
    tensor = scores if isinstance(scores, torch.Tensor) else torch.from_numpy(np.asarray(scores))
    single = tensor.dim() == 2
    if tensor.dim() not in (2, 3) or tensor.shape[-1] != tensor.shape[-2]:
        raise ValueError(f"scores must be an (n, n) or (B, n, n) matrix, got shape {tuple(tensor.shape)}")
    tensor = tensor.to(torch.float64)
    if single:
        tensor = tensor[None]
    if lengths is None:
        lengths = torch.full((tensor.shape[0],), tensor.shape[-1], dtype=torch.int64)
    else:
        lengths = torch.as_tensor(np.asarray(lengths) if not isinstance(lengths, torch.Tensor) else lengths)
        lengths = lengths.to(torch.int64)
        if lengths.shape != (tensor.shape[0],) or bool((lengths > tensor.shape[-1]).any() or (lengths < 0).any()):
            raise ValueError(f"lengths must be (B,) within 0..{tensor.shape[-1]}, got {lengths.tolist()}")
    if bool(torch.isnan(tensor).any()) or bool(tensor.max() == float("inf")):
        raise ValueError("scores contains NaN or +inf; use -inf for impossible arcs")
    return tensor, lengths, single


def _shifted_laplacian(
    scores: torch.Tensor, lengths: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Koo et al.'s single-root Laplacian (transposed: rows are dependents), its arc and root weights,
    and the row shifts, for a (B, n, n) batch.

    K[m, h] = -w(h -> m) + [m == h] * sum_h' w(h' -> m) for h >= 1, and K[m, 0] = w(root -> m);
    det K is the sum of the weights of all single-root trees. Padding rows and columns are the
    identity, so they change neither the determinant nor the real entries of the inverse.
    """
    n = scores.shape[-1]
    units = torch.arange(n)
    real = units[None, :] < lengths[:, None]
    real_pairs = real[:, :, None] & real[:, None, :]
    impossible = ~real_pairs | (scores == float("-inf"))
    masked = scores.masked_fill(impossible, float("-inf"))
    shifts = masked.amax(dim=-1, keepdim=True)
    if bool((real & torch.isneginf(shifts[..., 0])).any()):
        bad = torch.nonzero((real & torch.isneginf(shifts[..., 0])).any(-1)).flatten().tolist()
        raise ValueError(f"no single-root tree has a finite score in sentence(s) {bad}: a word has no possible head")
    shifts = shifts.masked_fill(~real[..., None], 0.0)
    # Possible arcs far below their row's best count as LOG_FLOOR below it: float64 keeps them
    # (e^-745 is 0), so the Laplacian keeps its rank when the tree constraint forces such an arc.
    weights = torch.exp((masked - shifts).clamp_min(-LOG_FLOOR)).masked_fill(impossible, 0.0)
    eye = torch.eye(n, dtype=torch.bool)
    arc_weights = weights.masked_fill(eye, 0.0)
    root_weights = torch.diagonal(weights, dim1=-2, dim2=-1)
    laplacian = torch.diag_embed(arc_weights.sum(-1)) - arc_weights
    laplacian = torch.cat([root_weights[..., None], laplacian[..., 1:]], dim=-1)
    laplacian = torch.where(real_pairs, laplacian, eye.to(laplacian.dtype).expand_as(laplacian))
    return laplacian, arc_weights, root_weights, shifts[..., 0].masked_fill(~real, 0.0)


def log_partition(scores: ArrayLike, lengths: Optional[ArrayLike] = None) -> torch.Tensor:
    """log Z, the log of the summed weight of all single-root trees: a scalar, or (B,) for a batch.

    -inf where no single-root tree has a finite score; 0 for an empty sentence.
    """
    batch, lengths, single = _as_batch(scores, lengths)
    laplacian, arc_weights, root_weights, shifts = _shifted_laplacian(batch, lengths)
    log_z = _log_z(laplacian, shifts)
    ill = _ill_conditioned(laplacian, _inverse_or_nan(laplacian.detach()), log_z)
    if bool(ill.any()):
        exact = _eliminated_log_det(arc_weights[ill], root_weights[ill], lengths[ill]) + shifts[ill].sum(-1)
        log_z = log_z.index_put((ill,), exact)
    return log_z[0] if single else log_z


def _log_z(laplacian: torch.Tensor, shifts: torch.Tensor) -> torch.Tensor:
    """log det K plus the row shifts taken out before exponentiating; -inf where det K <= 0 (no tree)."""
    sign, log_det = torch.linalg.slogdet(laplacian)
    return torch.where(sign > 0, log_det, torch.full_like(log_det, float("-inf"))) + shifts.sum(-1)


def _inverse_or_nan(laplacian: torch.Tensor) -> torch.Tensor:
    """The batch's inverses; torch's LU can raise on a numerically singular matrix instead of
    reporting it, so then each sentence is inverted alone and the ones it gives up on are NaN."""
    try:
        return torch.linalg.inv_ex(laplacian)[0]
    except RuntimeError:
        inverses = []
        for matrix in laplacian:
            try:
                inverses.append(torch.linalg.inv_ex(matrix)[0])
            except RuntimeError:
                inverses.append(torch.full_like(matrix, float("nan")))
        return torch.stack(inverses)


def _ill_conditioned(laplacian: torch.Tensor, inverse: torch.Tensor, log_z: torch.Tensor) -> torch.Tensor:
    """(B,) sentences LU cannot be trusted on: no finite result, or |K|_inf |K^-1|_max over CONDITION_LIMIT."""
    with torch.no_grad():
        condition = laplacian.abs().sum(-1).amax(-1) * inverse.abs().amax(dim=(-1, -2))
        return ~torch.isfinite(log_z) | ~(condition <= CONDITION_LIMIT)  # NaN counts as ill


def _eliminated_log_det(arc_weights: torch.Tensor, root_weights: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(B,) log det K of `_shifted_laplacian`'s matrix, by elimination without subtraction.

    Rows 1.. of K restricted to columns 1.. form a diagonally dominant M-matrix: off-diagonal
    entries -w(h -> m) and a slack (diagonal minus their sum) of w(word 0 -> m). Eliminating words
    1..n-1 in order keeps that form, and every update (off-diagonals, slacks, the root column,
    row 0) adds terms of one sign (Ye 2008, "Relative perturbation bounds for diagonally dominant
    matrices"), so each pivot, and det K = their product times what is left of K[0, 0], is exact
    to rounding. log(0) = -inf where no single-root tree has any weight.
    """
    n = arc_weights.shape[-1]
    units = torch.arange(n)
    real = units[None, :] < lengths[:, None]
    slacks = torch.where(real, arc_weights[..., 0], torch.ones_like(root_weights))  # padding: pivot 1
    off_diagonal = arc_weights * (units != 0).to(arc_weights.dtype)  # |K[m, h]| for h >= 1, m != h
    root_column = root_weights  # K[m, 0]
    log_det = torch.zeros_like(root_weights[:, 0])
    not_diagonal = ~torch.eye(n, dtype=torch.bool)
    for k in range(1, n):
        remaining = (units > k).to(arc_weights.dtype)
        pivot = slacks[:, k] + (off_diagonal[:, k] * remaining).sum(-1)
        log_det = log_det + torch.log(pivot)
        factors = off_diagonal[..., k] / pivot[:, None] * ((units > k) | (units == 0)).to(arc_weights.dtype)
        spread = factors[:, :, None] * (off_diagonal[:, k, None, :] * remaining) * not_diagonal
        off_diagonal = off_diagonal + spread
        slacks = slacks + factors * slacks[:, k, None]
        root_column = root_column + factors * root_column[:, k, None]
    return log_det + torch.log(root_column[:, 0])


def _exact_marginals_with_log_det(
    arc_weights: torch.Tensor, root_weights: torch.Tensor, lengths: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor]:
    """((B, n, n) marginals, (B,) log det K) from `_eliminated_log_det` and its gradient:
    mu = w * d log det K / d w. Keeps the graph when the weights require grad."""
    differentiable = arc_weights.requires_grad or root_weights.requires_grad
    with torch.enable_grad():
        arcs = arc_weights if differentiable else arc_weights.detach().requires_grad_()
        roots = root_weights if differentiable else root_weights.detach().requires_grad_()
        log_det = _eliminated_log_det(arcs, roots, lengths)
        d_arcs, d_roots = torch.autograd.grad(log_det.sum(), (arcs, roots), create_graph=differentiable)
    marginals = arcs * d_arcs + torch.diag_embed(roots * d_roots)
    return (marginals, log_det) if differentiable else (marginals.detach(), log_det.detach())


def tree_marginals_with_log_partition(
    scores: ArrayLike, lengths: Optional[ArrayLike] = None
) -> Tuple[torch.Tensor, torch.Tensor]:
    """((B, n, n) marginals, (B,) log Z) of a batch, in the layout of `scores` (diagonal: root).

    The marginals are w * d log Z / d w from the inverse of the Laplacian (Koo et al., sec. 3.3):
    mu(h -> m) = w(h -> m) * ([m != 0] K^-1[m, m] - [h != 0] K^-1[h, m]) and
    mu(root -> m) = w(root -> m) * K^-1[0, m]; ill-conditioned sentences by exact elimination.
    Padding entries are 0.
    """
    batch, lengths, _ = _as_batch(scores, lengths)
    laplacian, arc_weights, root_weights, shifts = _shifted_laplacian(batch, lengths)
    inverse = _inverse_or_nan(laplacian)
    n = batch.shape[-1]
    not_first = (torch.arange(n) != 0).to(batch.dtype)
    own = torch.diagonal(inverse, dim1=-2, dim2=-1) * not_first  # [m != 0] K^-1[m, m]
    through_head = inverse.transpose(-1, -2) * not_first[None, None, :]  # [h != 0] K^-1[h, m] at [m, h]
    arc_marginals = arc_weights * (own[..., :, None] - through_head)
    root_marginals = root_weights * inverse[:, 0, :]
    marginals = arc_marginals + torch.diag_embed(root_marginals)  # padding: weight 0
    log_z = _log_z(laplacian, shifts)
    ill = _ill_conditioned(laplacian, inverse, log_z)
    if bool(ill.any()):
        exact, log_det = _exact_marginals_with_log_det(arc_weights[ill], root_weights[ill], lengths[ill])
        marginals = marginals.index_put((ill,), exact)
        log_z = log_z.index_put((ill,), log_det + shifts[ill].sum(-1))
    marginals = marginals.clamp(0.0, 1.0)
    # No single-root tree with any weight: NaN, not a guess.
    unusable = ~torch.isfinite(log_z) | torch.isnan(marginals.sum(dim=(-1, -2)))
    marginals = torch.where(unusable[:, None, None], torch.full_like(marginals, float("nan")), marginals)
    return marginals, torch.where(unusable, torch.full_like(log_z, float("nan")), log_z)


def tree_marginals(scores: ArrayLike, lengths: Optional[ArrayLike] = None) -> ArrayLike:
    """Marginal probability of every arc (the diagonal: of being the root) under the distribution
    over single-root trees of one (n, n) log-score matrix, or of a (B, n, n) batch with `lengths`.

    Each row (a word's possible heads, the root included) sums to 1. Returns what it was given: a
    numpy array for numpy input, a float64 tensor (differentiable) for a tensor.
    """
    marginals, _ = tree_marginals_with_log_partition(scores, lengths)
    if isinstance(scores, torch.Tensor):
        return marginals if scores.dim() == 3 else marginals[0]
    result = marginals.detach().numpy()
    return result if np.ndim(scores) == 3 else result[0]


def root_first_to_diagonal(arcs: np.ndarray) -> np.ndarray:
    """(B, N, N) scores with the root at unit 0 (`decoding.py`'s layout: arcs[b, i, 0] the root arc
    of word i) -> (B, N - 1, N - 1) with the root arcs on the diagonal."""
    words = arcs[:, 1:, 1:].copy()
    n = words.shape[-1]
    words[:, np.arange(n), np.arange(n)] = arcs[:, 1:, 0]
    return words


def diagonal_to_root_first(matrix: np.ndarray) -> np.ndarray:
    """Inverse of `root_first_to_diagonal`: (B, n, n) -> (B, n + 1, n + 1), row 0 and the diagonal 0."""
    batch, n, _ = matrix.shape
    units = np.zeros((batch, n + 1, n + 1), dtype=matrix.dtype)
    units[:, 1:, 1:] = matrix
    diagonal = np.arange(n)
    units[:, 1 + diagonal, 0] = matrix[:, diagonal, diagonal]
    units[:, 1 + diagonal, 1 + diagonal] = 0
    return units


def decoded_tree_confidence(
    arcs: np.ndarray,
    lengths: np.ndarray,
    heads: np.ndarray,
    label_scores: np.ndarray,
    label_allowed: np.ndarray,
    labels: np.ndarray,
    arc_temperature: float = 1.0,
    label_temperature: float = 1.0,
    n_candidates: int = 3,
) -> Dict[str, np.ndarray]:
    """How sure a chunk of decoded sentences is, from the decoder's inputs and outputs.

    arcs (B, N, N): log-scores in the decoder's layout (unit 0 the root, arcs[b, i, j] for j -> i);
    lengths (B,) words per sentence; heads (B, N) the decoded head units; label_scores (B, N, K) the
    label scores on the decoded arcs, label_allowed (B, N, K) the labels the decoder could choose
    there, labels (B, N) its choices. The temperatures divide the arc and label scores.

    Returns (B, N) `head_prob` (the decoded arc's tree marginal) and `dep_prob` (the chosen label's
    probability among the allowed ones), (B, N, k) `candidate_units` / `candidate_probs` (the k
    most probable heads, root = unit 0, -1 past the heads with any probability), (B,) `tree_prob`
    (decoded tree times its labels), and
    (B, N, N) `marginals` in the decoder's layout. Entries of unit 0 and padding are meaningless.
    """
    scaled = np.where(arcs > NEG_INF, arcs / arc_temperature, -np.inf)  # the decoder's NEG_INF: impossible
    with np.errstate(invalid="ignore"):  # the floor the marginals use, so the tree's score matches log Z
        scaled = np.where(
            np.isfinite(scaled), np.maximum(scaled, scaled.max(axis=-1, keepdims=True) - LOG_FLOOR), scaled
        )
    marginals, log_z = tree_marginals_with_log_partition(root_first_to_diagonal(scaled), lengths)
    units = diagonal_to_root_first(marginals.numpy())
    batch, n_units = heads.shape
    rows, cols = np.arange(batch)[:, None], np.arange(n_units)[None, :]
    words = (cols >= 1) & (cols <= np.asarray(lengths)[:, None])
    safe_heads = np.where(words, heads, 0)
    head_prob = units[rows, cols, safe_heads]
    label_logits = np.where(label_allowed, label_scores / label_temperature, -np.inf)
    label_log_probs = label_logits - logsumexp(label_logits, axis=-1, keepdims=True)
    dep_log_prob = np.take_along_axis(label_log_probs, labels[..., None], axis=-1)[..., 0]
    arc_log_score = np.where(words, scaled[rows, cols, safe_heads], 0.0).sum(-1)
    tree_log_prob = arc_log_score - log_z.numpy() + np.where(words, dep_log_prob, 0.0).sum(-1)
    k = min(n_candidates, n_units)
    top = np.argpartition(-units, k - 1, axis=-1)[..., :k] if k < n_units else np.arange(n_units)[None, None]
    top = np.broadcast_to(top, units.shape[:2] + (k,))
    order = np.take_along_axis(top, np.argsort(-np.take_along_axis(units, top, -1), axis=-1, kind="stable"), -1)
    candidate_probs = np.take_along_axis(units, order, axis=-1)
    return {
        "head_prob": head_prob,
        "dep_prob": np.exp(dep_log_prob),
        "candidate_units": np.where(candidate_probs > 0, order, -1),
        "candidate_probs": candidate_probs,
        "tree_prob": np.exp(np.minimum(tree_log_prob, 0.0)),
        "marginals": units,
    }
