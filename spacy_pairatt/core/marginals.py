"""Tree marginals: how probable each arc is under the distribution over single-root dependency trees.

Conventions (Koo et al. 2007, "Structured prediction models via the matrix-tree theorem"):

* One sentence of ``n`` words is an ``(n, n)`` log-score matrix; row ``i`` is the *dependent*,
  column ``j`` the *head*, ``scores[i, j]`` the log-score of the arc ``j -> i`` and the diagonal
  ``scores[i, i]`` the log-score of word ``i`` being the root. ``-inf`` (or a very negative score)
  marks an impossible arc.
* A tree's probability is ``exp(sum of its arcs' scores - log Z)``, over the trees with exactly
  one root: the trees the MST decoder returns.
* Batches are ``(B, n, n)`` with ``lengths`` (B,): sentence b is ``scores[b, :lengths[b], :lengths[b]]``.

Everything runs in log space: each dependent's row is shifted by its maximum before exponentiating
(the shift multiplies every tree's weight by the same factor, so it leaves the marginals unchanged
and enters log Z as a sum), so large scores do not overflow and a row's small entries are not
flushed against another row's large ones. An arc more than LOG_FLOOR (500) below its row's best
counts as LOG_FLOOR below it (float64 holds nothing under e^-745). That changes nothing unless the
tree constraint forces such an arc, which needs a row spread over 500 nats: a trained parser's
rows spread over at most about 40 (EWT dev, temperature-scaled).

A batch costs one LU factorization and one solve for the inverse (O(n^3) time, O(n^2) memory per
sentence, no Python loop over sentences). A Laplacian entry is a sum of weights, and where a group
of words is tied to the rest of the tree only by weights e^-40 below their own arcs, that sum rounds
them away and LU returns garbage or a zero determinant. Sentences whose Laplacian is that
ill-conditioned (|K| |K^-1| over CONDITION_LIMIT) are redone by `_eliminated_log_det`, Gaussian
elimination that never subtracts (the Laplacian kept as off-diagonal weights plus each row's
slack), with the marginals from its hand-written reverse pass (`_eliminated_marginals`: O(n^2)
memory, a loop over the words, not the sentences). With the floor that is exact to about 1e-10
for any score spread (the tests: up to 500 nats against brute force). All in float64: float32 LU
is slower than float64 in torch's batched CPU LU at parse shapes, and a third of EWT-like
sentences have |K| |K^-1| over 1e3, where float32 would be wrong in the fourth decimal.

NaN marginals and log Z only where no single-root tree has any weight; log Z is +inf (marginals
still finite) where the scores are so large that it overflows float64; a word with no possible
head at all is a ValueError. An empty sentence has no marginals and log Z 0. The functions are
differentiable by autograd: log Z with O(n^2) memory on every path; the marginals' own gradient (a
second derivative of log Z) rebuilds the elimination's graph during the backward pass for the
ill-conditioned sentences only.

The decoder (`decoding.py`) and the parser's scores put the root at unit 0 instead:
`root_first_to_diagonal` and `diagonal_to_root_first` convert between the two layouts.
"""

from typing import Dict, Optional, Tuple, Union

import numpy as np
import torch

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
    if bool(torch.isnan(tensor).any()) or bool((tensor == float("inf")).any()):
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
    return _laplacian(arc_weights, root_weights, real_pairs), arc_weights, root_weights, shifts[..., 0]


def _laplacian(arc_weights: torch.Tensor, root_weights: torch.Tensor, real_pairs: torch.Tensor) -> torch.Tensor:
    """K of `_shifted_laplacian` from the weights, in their dtype."""
    eye = torch.eye(arc_weights.shape[-1], dtype=torch.bool)
    laplacian = torch.diag_embed(arc_weights.sum(-1)) - arc_weights
    laplacian = torch.cat([root_weights[..., None], laplacian[..., 1:]], dim=-1)
    return torch.where(real_pairs, laplacian, eye.to(laplacian.dtype).expand_as(laplacian))


def _lu_inverse_and_log_det(laplacian: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """(B, n, n) inverses and (B,) log det K from one batched LU factorization; log det -inf where
    det K <= 0 and the inverse NaN where LU found an exact zero pivot (both then go to elimination)."""
    factors, pivots, info = torch.linalg.lu_factor_ex(laplacian)
    n = laplacian.shape[-1]
    singular = info != 0
    if bool(singular.any()):  # lu_solve would divide by the zero pivot: solve with the identity instead
        eye = torch.eye(n, dtype=laplacian.dtype).expand_as(factors)
        factors = torch.where(singular[:, None, None], eye, factors)
        pivots = torch.where(singular[:, None], torch.arange(1, n + 1, dtype=pivots.dtype), pivots)
    diagonal = torch.diagonal(factors, dim1=-2, dim2=-1)
    swaps = (pivots != torch.arange(1, n + 1, dtype=pivots.dtype)).sum(-1)
    negative = ((diagonal < 0).sum(-1) + swaps) % 2 == 1
    log_det = torch.log(diagonal.abs()).sum(-1)
    log_det = log_det.masked_fill(negative | singular | (diagonal == 0).any(-1), float("-inf"))
    identity = torch.eye(n, dtype=laplacian.dtype).repeat(len(factors), 1, 1)  # contiguous: lu_solve is slow on a view
    inverse = torch.linalg.lu_solve(factors, pivots, identity)
    return inverse.masked_fill(singular[:, None, None], float("nan")), log_det


def _lu_marginals(
    laplacian: torch.Tensor, arc_weights: torch.Tensor, root_weights: torch.Tensor, condition_limit: float
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """((B, n, n) marginals, (B,) log det K, (B,) whether LU can be trusted) from the inverse of the
    Laplacian (Koo et al., sec. 3.3): mu(h -> m) = w(h -> m) * ([m != 0] K^-1[m, m] - [h != 0] K^-1[h, m])
    and mu(root -> m) = w(root -> m) * K^-1[0, m]. LU is not trusted where det K <= 0 or
    |K|_inf |K^-1|_max is over condition_limit (NaN counts as over)."""
    inverse, log_det = _lu_inverse_and_log_det(laplacian)
    not_first = (torch.arange(laplacian.shape[-1]) != 0).to(laplacian.dtype)
    own = torch.diagonal(inverse, dim1=-2, dim2=-1) * not_first  # [m != 0] K^-1[m, m]
    through_head = inverse.transpose(-1, -2) * not_first  # [h != 0] K^-1[h, m] at [m, h]
    marginals = arc_weights * (own[..., :, None] - through_head) + torch.diag_embed(root_weights * inverse[:, 0, :])
    with torch.no_grad():
        condition = laplacian.abs().sum(-1).amax(-1) * inverse.abs().amax(dim=(-1, -2))
        trusted = torch.isfinite(log_det) & (condition <= condition_limit)
    return marginals, log_det, trusted


def _eliminated_log_det(arc_weights: torch.Tensor, root_weights: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(B,) log det K of `_shifted_laplacian`'s matrix, by elimination without subtraction.

    Rows 1.. of K restricted to columns 1.. form a diagonally dominant M-matrix: off-diagonal
    entries -w(h -> m) and a slack (diagonal minus their sum) of w(word 0 -> m). Eliminating words
    1..n-1 in order keeps that form, and every update (off-diagonals, slacks, the root column,
    row 0) adds terms of one sign (Ye 2008, "Relative perturbation bounds for diagonally dominant
    matrices"), so each pivot, and det K = their product times what is left of K[0, 0], is exact
    to rounding. log(0) = -inf where no single-root tree has any weight. Differentiable by autograd
    (the marginals' second derivative uses that); `_eliminated_marginals` is the same without a graph.
    """
    return _eliminate(arc_weights, root_weights, lengths)[0]


def _eliminate(arc_weights: torch.Tensor, root_weights: torch.Tensor, lengths: torch.Tensor):
    """(log det, the eliminated off-diagonals, slacks, root column, pivots) of `_eliminated_log_det`.

    Row k and column k of the off-diagonals are final once word k is eliminated, so the last state
    holds every value the elimination read: what the reverse pass needs, in O(n^2).
    """
    n = arc_weights.shape[-1]
    units = torch.arange(n)
    real = units[None, :] < lengths[:, None]
    slacks = torch.where(real, arc_weights[..., 0], torch.ones_like(root_weights))  # padding: pivot 1
    off_diagonal = arc_weights * (units != 0).to(arc_weights.dtype)  # |K[m, h]| for h >= 1, m != h
    root_column = root_weights  # K[m, 0]
    pivots = torch.ones_like(root_weights)
    not_diagonal = ~torch.eye(n, dtype=torch.bool)
    for k in range(1, n):
        remaining = (units > k).to(arc_weights.dtype)
        pivot = slacks[:, k] + (off_diagonal[:, k] * remaining).sum(-1)
        pivots = pivots.index_copy(1, torch.tensor([k]), pivot[:, None])
        factors = off_diagonal[..., k] / pivot[:, None] * ((units > k) | (units == 0)).to(arc_weights.dtype)
        spread = factors[:, :, None] * (off_diagonal[:, k, None, :] * remaining) * not_diagonal
        off_diagonal = off_diagonal + spread
        slacks = slacks + factors * slacks[:, k, None]
        root_column = root_column + factors * root_column[:, k, None]
    log_det = torch.log(pivots[:, 1:]).sum(-1) + torch.log(root_column[:, 0])
    return log_det, off_diagonal, slacks, root_column, pivots


def _eliminated_marginals(
    arc_weights: torch.Tensor, root_weights: torch.Tensor, lengths: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor]:
    """((B, n, n) marginals, (B,) log det K) by `_eliminated_log_det` and its gradient written out:
    mu = w * d log det K / d w. The reverse pass runs the elimination backwards from its last state
    (see `_eliminate`), every adjoint a sum of terms of one sign but each pivot's, and keeps no
    graph: O(n^2) memory. Arguments without gradient (see `_EliminatedMarginals` for the rest)."""
    log_det, off_diagonal, slacks, root_column, pivots = _eliminate(arc_weights, root_weights, lengths)
    n = arc_weights.shape[-1]
    units = torch.arange(n)
    not_diagonal = (~torch.eye(n, dtype=torch.bool)).to(arc_weights.dtype)
    d_off = torch.zeros_like(arc_weights)
    d_slacks = torch.zeros_like(root_weights)
    d_root = torch.zeros_like(root_weights)
    d_root[:, 0] = 1.0 / root_column[:, 0]
    for k in range(n - 1, 0, -1):
        remaining = (units > k).to(arc_weights.dtype)
        active = ((units > k) | (units == 0)).to(arc_weights.dtype)
        pivot = pivots[:, k, None]
        factors = off_diagonal[..., k] / pivot * active
        pivot_row = off_diagonal[:, k, :] * remaining
        d_spread = d_off * not_diagonal * remaining  # the adjoint of the entries step k added to
        d_factors = (d_spread * pivot_row[:, None, :]).sum(-1) + d_slacks * slacks[:, k, None]
        d_factors = (d_factors + d_root * root_column[:, k, None]) * active
        d_row = (d_spread * factors[..., None]).sum(-2)
        d_slack_k = (d_slacks * factors).sum(-1, keepdim=True)
        d_root_k = (d_root * factors).sum(-1, keepdim=True)
        d_pivot = (1.0 - (d_factors * factors).sum(-1, keepdim=True)) / pivot
        d_off[:, k, :] += d_row + d_pivot * remaining
        d_off[:, :, k] += d_factors / pivot
        d_slacks[:, k] += (d_slack_k + d_pivot)[:, 0]
        d_root[:, k] += d_root_k[:, 0]
    real = units[None, :] < lengths[:, None]
    d_arcs = d_off * (units != 0).to(arc_weights.dtype)
    d_arcs[..., 0] = torch.where(real, d_slacks, torch.zeros_like(d_slacks))
    marginals = arc_weights * d_arcs * not_diagonal + torch.diag_embed(root_weights * d_root)
    return marginals, log_det


class _EliminatedMarginals(torch.autograd.Function):
    """`_eliminated_marginals` for weights with a gradient: log det's gradient is the marginals over
    the weights (no graph kept); the marginals' own gradient rebuilds the elimination under autograd
    in the backward pass, and frees it there."""

    @staticmethod
    def forward(ctx, arc_weights, root_weights, lengths):
        marginals, log_det = _eliminated_marginals(arc_weights, root_weights, lengths)
        ctx.save_for_backward(arc_weights, root_weights, lengths, marginals)
        ctx.set_materialize_grads(False)
        return marginals, log_det

    @staticmethod
    def backward(ctx, d_marginals, d_log_det):
        arc_weights, root_weights, lengths, marginals = ctx.saved_tensors
        d_arcs = d_roots = None
        if d_log_det is not None:
            tiny = torch.finfo(marginals.dtype).tiny
            d_arcs = d_log_det[:, None, None] * marginals / arc_weights.clamp_min(tiny) * (arc_weights > 0)
            d_roots = d_log_det[:, None] * torch.diagonal(marginals, dim1=-2, dim2=-1) / root_weights.clamp_min(tiny)
            d_roots = d_roots * (root_weights > 0)
        if d_marginals is not None:
            with torch.enable_grad():
                arcs, roots = arc_weights.detach().requires_grad_(), root_weights.detach().requires_grad_()
                log_det = _eliminated_log_det(arcs, roots, lengths)
                d_log_det_arcs, d_log_det_roots = torch.autograd.grad(log_det.sum(), (arcs, roots), create_graph=True)
                again = arcs * d_log_det_arcs + torch.diag_embed(roots * d_log_det_roots)
                second = torch.autograd.grad(again, (arcs, roots), d_marginals)
            d_arcs = second[0] if d_arcs is None else d_arcs + second[0]
            d_roots = second[1] if d_roots is None else d_roots + second[1]
        return d_arcs, d_roots, None


def _exact_marginals(arc_weights: torch.Tensor, root_weights: torch.Tensor, lengths: torch.Tensor):
    """`_eliminated_marginals`, through `_EliminatedMarginals` where the weights carry a gradient."""
    if arc_weights.requires_grad or root_weights.requires_grad:
        return _EliminatedMarginals.apply(arc_weights, root_weights, lengths)
    return _eliminated_marginals(arc_weights, root_weights, lengths)


def _marginals_with_log_det(
    batch: torch.Tensor, lengths: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """((B, n, n) marginals, (B,) log det K, (B,) summed row shifts): LU, then exact elimination
    for the sentences LU cannot be trusted on."""
    laplacian, arc_weights, root_weights, shifts = _shifted_laplacian(batch, lengths)
    marginals, log_det, trusted = _lu_marginals(laplacian, arc_weights, root_weights, CONDITION_LIMIT)
    ill = ~trusted
    if bool(ill.any()):
        exact, exact_log_det = _exact_marginals(arc_weights[ill], root_weights[ill], lengths[ill])
        marginals, log_det = marginals.index_put((ill,), exact), log_det.index_put((ill,), exact_log_det)
    return marginals, log_det, shifts.sum(-1)


def tree_marginals_with_log_partition(
    scores: ArrayLike, lengths: Optional[ArrayLike] = None
) -> Tuple[torch.Tensor, torch.Tensor]:
    """((B, n, n) marginals, (B,) log Z) of a batch, in the layout of `scores` (diagonal: root).
    Padding entries are 0."""
    batch, lengths, _ = _as_batch(scores, lengths)
    if batch.shape[-1] == 0 or batch.shape[0] == 0:
        return batch.clone(), torch.zeros(batch.shape[0], dtype=batch.dtype)
    marginals, log_det, shift = _marginals_with_log_det(batch, lengths)
    marginals = marginals.clamp(0.0, 1.0)
    # No single-root tree with any weight: NaN, not a guess.
    unusable = torch.isneginf(log_det) | torch.isnan(log_det) | torch.isnan(marginals.sum(dim=(-1, -2)))
    marginals = torch.where(unusable[:, None, None], torch.full_like(marginals, float("nan")), marginals)
    log_z = log_det + shift
    return marginals, torch.where(unusable, torch.full_like(log_z, float("nan")), log_z)


def log_partition(scores: ArrayLike, lengths: Optional[ArrayLike] = None) -> torch.Tensor:
    """log Z, the log of the summed weight of all single-root trees: a scalar, or (B,) for a batch.

    -inf where no single-root tree has any weight; 0 for an empty sentence. Its gradient is the marginals.
    """
    _, log_z = tree_marginals_with_log_partition(scores, lengths)
    log_z = torch.nan_to_num(log_z, nan=float("-inf"), posinf=float("inf"))
    return log_z[0] if (scores.dim() if isinstance(scores, torch.Tensor) else np.ndim(scores)) == 2 else log_z


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
    leaves: Optional[np.ndarray] = None,
) -> Dict[str, np.ndarray]:
    """How sure a chunk of decoded sentences is, from the decoder's inputs and outputs.

    arcs (B, N, N): log-scores in the decoder's layout (unit 0 the root, arcs[b, i, j] for j -> i);
    lengths (B,) words per sentence; heads (B, N) the decoded head units; label_scores (B, N, K) the
    label scores on the decoded arcs, label_allowed (B, N, K) the labels the decoder could choose
    there, labels (B, N) its choices. The temperatures divide the arc and label scores. leaves (B, N):
    units that are no word of the tree (whitespace, `attach_leaves`): they get no confidence and
    leave `tree_prob` alone.

    Returns (B, N) `head_prob` (the decoded arc's tree marginal) and `dep_prob` (the chosen label's
    probability among the allowed ones), NaN for leaves; (B, N, k) `candidate_units` /
    `candidate_probs` (the k most probable heads, root = unit 0, -1 past the heads with any
    probability), (B,) `tree_prob` (decoded tree times its labels; NaN for a sentence with no word
    but leaves), and (B, N, N) `marginals` in the decoder's layout. Entries of unit 0 and padding
    are meaningless.
    """
    scaled = np.where(arcs > NEG_INF, arcs / arc_temperature, -np.inf)  # the decoder's NEG_INF: impossible
    with np.errstate(invalid="ignore"):  # rows shifted to their best (log Z stays finite), floored as the marginals are
        best = scaled.max(axis=-1, keepdims=True)
        scaled = np.where(np.isfinite(scaled), np.maximum(scaled - best, -LOG_FLOOR), -np.inf)
    marginals, log_z = tree_marginals_with_log_partition(root_first_to_diagonal(scaled), lengths)
    units = diagonal_to_root_first(marginals.numpy())
    batch, n_units = heads.shape
    rows, cols = np.arange(batch)[:, None], np.arange(n_units)[None, :]
    words = (cols >= 1) & (cols <= np.asarray(lengths)[:, None])
    tree_words = words if leaves is None else words & ~leaves
    safe_heads = np.where(words, heads, 0)
    label_logits = np.where(label_allowed, label_scores / label_temperature, -np.inf)
    top_logit = label_logits.max(axis=-1, keepdims=True)
    label_log_norm = np.log(np.exp(label_logits - top_logit).sum(-1)) + top_logit[..., 0]
    dep_log_prob = np.take_along_axis(label_logits, labels[..., None], axis=-1)[..., 0] - label_log_norm
    arc_log_score = np.where(words, scaled[rows, cols, safe_heads], 0.0).sum(-1)
    tree_log_prob = arc_log_score - log_z.numpy() + np.where(tree_words, dep_log_prob, 0.0).sum(-1)
    candidate_probs, order = torch.from_numpy(units).topk(min(n_candidates, n_units), dim=-1)
    candidate_probs, order = candidate_probs.numpy(), order.numpy()
    no_word = ~tree_words.any(-1)
    return {
        "head_prob": np.where(tree_words, units[rows, cols, safe_heads], np.nan),
        "dep_prob": np.where(tree_words, np.exp(dep_log_prob), np.nan),
        "candidate_units": np.where((candidate_probs > 0) & tree_words[..., None], order, -1),
        "candidate_probs": candidate_probs,
        "tree_prob": np.where(no_word, np.nan, np.exp(np.minimum(tree_log_prob, 0.0))),
        "marginals": units,
    }
