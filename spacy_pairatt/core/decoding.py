"""Dependency-tree decoding from arc score matrices (numpy checks, numba-compiled search).

Conventions shared by every function here:

* A sentence of ``n`` words is scored by a float matrix ``scores`` of shape
  ``(n + 1, n + 1)``.  Row ``i`` is the *dependent*, column ``j`` the
  candidate *head*; index 0 is the artificial ROOT and words are ``1..n``.
  ``scores[i, j]`` is the log-score of the arc ``j -> i``.
* Row 0 (the root's own head) and the diagonal are ignored.  ``-inf`` marks a
  disallowed arc; NaN and ``+inf`` are rejected.
* Decoders return an ``int64`` array ``heads`` of length ``n + 1`` with
  ``heads[0] == -1`` (the root has no head) and ``heads[i] in 0..n`` for words.

The tree search (Chu-Liu/Edmonds) is compiled with numba, and `decode_batch` decodes a padded
batch of sentences in one compiled call; the first call in a process compiles (cached on disk).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit

from .tree_checks import head_array_problem

ROOT_HEAD = -1
"""Value stored in ``heads[0]``: the artificial root has no head."""


def _arc_scores(scores: np.ndarray) -> np.ndarray:
    """Validate ``scores`` and return a float64 copy with unusable arcs at -inf.

    Row 0 and the diagonal are set to ``-inf`` so that every decoder can take
    plain row-wise maxima.  Only the arcs that are actually used are checked
    for NaN / ``+inf``, since the rest is documented as ignored.
    """
    arr = np.array(scores, dtype=np.float64, copy=True)
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise ValueError(f"scores must be a non-empty square (n+1, n+1) matrix, got shape {arr.shape}")
    arr[0, :] = -np.inf
    np.fill_diagonal(arr, -np.inf)
    if np.isnan(arr).any():
        raise ValueError("scores contains NaN arc scores")
    if np.isposinf(arr).any():
        raise ValueError("scores contains +inf arc scores; use -inf for disallowed arcs")
    return arr


@njit(cache=True)
def _row_argmax(scores: np.ndarray, row: int) -> int:
    best, best_score = 0, -np.inf
    for j in range(scores.shape[1]):
        if scores[row, j] > best_score:
            best, best_score = j, scores[row, j]
    return best


@njit(cache=True)
def _best_heads(arc_scores: np.ndarray) -> np.ndarray:
    """Row-wise argmax of an already masked matrix; node 0 points to itself.

    The root self-loop makes the root a fixed point, which keeps the cycle search simple.
    """
    m = arc_scores.shape[0]
    heads = np.zeros(m, dtype=np.int64)
    for i in range(1, m):
        heads[i] = _row_argmax(arc_scores, i)
    return heads


@njit(cache=True)
def _find_cycle(heads: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """Members of one cycle of the functional graph `heads` over live nodes, or an empty array.

    Walks from every unvisited node, marking the nodes of the current walk; reaching a node of
    the current walk closes a cycle. Each node is walked once: O(m).
    """
    m = heads.shape[0]
    walk = np.full(m, -1, dtype=np.int64)
    for start in range(1, m):
        if not alive[start] or walk[start] != -1:
            continue
        node = start
        while node != 0 and walk[node] == -1:
            walk[node] = start
            node = heads[node]
        if node != 0 and walk[node] == start:
            length = 1
            member = heads[node]
            while member != node:
                length += 1
                member = heads[member]
            cycle = np.empty(length, dtype=np.int64)
            cycle[0] = node
            for k in range(1, length):
                cycle[k] = heads[cycle[k - 1]]
            return cycle
    return np.empty(0, dtype=np.int64)


@njit(cache=True)
def _chu_liu_edmonds(arc_scores: np.ndarray) -> np.ndarray:
    """Maximum spanning arborescence rooted at 0 of a masked score matrix (heads[0] == 0).

    Chu-Liu/Edmonds without recursion: take greedy heads; while they contain a cycle, contract it
    in place into its first member: an arc entering the cycle is scored relative to the cycle arc
    it breaks, an arc leaving it takes the best member as head, the other members are killed, and
    the greedy heads stay valid argmaxes, so only the representative's head is recomputed. Once
    the greedy heads form a tree, the contractions are undone in reverse order: dependents of a
    contracted node get back the member that was their best head, and the cycle keeps all its arcs
    but the one into the member where the chosen entering arc lands.
    """
    scores = arc_scores.copy()
    m = scores.shape[0]
    alive = np.ones(m, dtype=np.bool_)
    heads = _best_heads(scores)
    cycles = []
    cycle_heads = []
    entry_deps = []
    exit_heads = []
    outsides = []
    cycle = _find_cycle(heads, alive)
    while cycle.shape[0] > 0:
        rep = cycle[0]
        in_cycle = np.zeros(m, dtype=np.bool_)
        in_cycle[cycle] = True
        outside = alive & ~in_cycle
        members_heads = heads[cycle].copy()
        entry_dep = np.zeros(m, dtype=np.int64)
        exit_head = np.zeros(m, dtype=np.int64)
        entering = np.full(m, -np.inf)
        leaving = np.full(m, -np.inf)
        for k in range(cycle.shape[0]):
            member = cycle[k]
            kept = scores[member, members_heads[k]]
            for h in range(m):
                if outside[h]:
                    value = scores[member, h] - kept
                    if value > entering[h]:
                        entering[h] = value
                        entry_dep[h] = member
            for i in range(m):
                if outside[i] and scores[i, member] > leaving[i]:
                    leaving[i] = scores[i, member]
                    exit_head[i] = member
        for k in range(1, cycle.shape[0]):
            member = cycle[k]
            scores[member, :] = -np.inf
            scores[:, member] = -np.inf
            alive[member] = False
            heads[member] = 0
        scores[rep, :] = entering
        scores[:, rep] = leaving
        scores[rep, rep] = -np.inf
        for i in range(m):
            if outside[i] and in_cycle[heads[i]]:
                heads[i] = rep
        heads[rep] = _row_argmax(scores, rep)
        cycles.append(cycle)
        cycle_heads.append(members_heads)
        entry_deps.append(entry_dep)
        exit_heads.append(exit_head)
        outsides.append(outside)
        cycle = _find_cycle(heads, alive)
    for c in range(len(cycles) - 1, -1, -1):
        cycle = cycles[c]
        rep = cycle[0]
        entry_head = heads[rep]
        outside = outsides[c]
        exit_head = exit_heads[c]
        for i in range(m):
            if outside[i] and heads[i] == rep:
                heads[i] = exit_head[i]
        heads[cycle] = cycle_heads[c]
        heads[entry_deps[c][entry_head]] = entry_head
    return heads


@njit(cache=True)
def _is_finite_single_rooted_tree(arc_scores: np.ndarray, heads: np.ndarray) -> bool:
    """Whether `heads` (heads[0] == 0) uses allowed arcs only, has one root child and no cycle."""
    m = heads.shape[0]
    roots = 0
    for i in range(1, m):
        if heads[i] == 0:
            roots += 1
        if not np.isfinite(arc_scores[i, heads[i]]):
            return False
    return roots == 1 and _find_cycle(heads, np.ones(m, dtype=np.bool_)).shape[0] == 0


# What `_mst` returns in heads[0] when no tree can be given, and the error each means.
_MST_ERRORS = {
    -2: "no single-rooted tree exists: every arc is disallowed (-inf)",
    -3: "score range too large to enforce a single root numerically",
    -4: "no tree exists: the allowed (finite) arcs cannot span all words",
    -5: "no single-rooted tree exists with the allowed (finite) arcs",
}


@njit(cache=True)
def _mst(arc_scores: np.ndarray) -> np.ndarray:
    """`mst_heads` on a masked float64 matrix; heads[0] is ROOT_HEAD, or an `_MST_ERRORS` code."""
    m = arc_scores.shape[0]
    n = m - 1
    heads = _best_heads(arc_scores)
    if n == 0 or _is_finite_single_rooted_tree(arc_scores, heads):
        # Every word already has its best head: no tree scores higher (a trained model's usual case).
        heads[0] = ROOT_HEAD
        return heads
    low, high, any_finite = np.inf, -np.inf, False
    for i in range(m):
        for j in range(m):
            value = arc_scores[i, j]
            if np.isfinite(value):
                any_finite = True
                low = min(low, value)
                high = max(high, value)
    if not any_finite:
        heads[0] = -2
        return heads
    penalty = 1.0 + n * (high - low)
    if not np.isfinite(penalty):
        heads[0] = -3
        return heads
    penalised = arc_scores.copy()
    penalised[:, 0] -= penalty
    heads = _chu_liu_edmonds(penalised)
    roots = 0
    for i in range(1, m):
        if not np.isfinite(penalised[i, heads[i]]):
            heads[0] = -4
            return heads
        roots += heads[i] == 0
    heads[0] = ROOT_HEAD if roots == 1 else -5
    return heads


@njit(cache=True)
def _mst_batch(arcs: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(B, N) heads of the B padded masked matrices, sentence b over lengths[b] + 1 units."""
    heads = np.full(arcs.shape[:2], ROOT_HEAD, dtype=np.int64)
    for b in range(arcs.shape[0]):
        m = lengths[b] + 1
        heads[b, :m] = _mst(np.ascontiguousarray(arcs[b, :m, :m]))
    return heads


def greedy_heads(scores: np.ndarray) -> np.ndarray:
    """Best head for every word independently (may contain cycles / several roots).

    This is the cheap decoder used during training, where well-formedness is
    not required.
    """
    heads = _best_heads(_arc_scores(scores))
    heads[0] = ROOT_HEAD
    return heads


def mst_heads(scores: np.ndarray) -> np.ndarray:
    """Highest-scoring non-projective tree with exactly one word attached to ROOT.

    Single-rootedness is enforced by subtracting from every root arc a
    constant larger than the spread of any two trees' scores, so every tree
    with several root children loses to every single-root tree; the constant
    cancels out among single-root trees.  Raises ValueError for malformed
    scores and when no single-rooted tree with finite score exists.
    """
    return _checked(_mst(_arc_scores(scores)))


def _checked(heads: np.ndarray) -> np.ndarray:
    if heads[..., 0].min(initial=ROOT_HEAD) < ROOT_HEAD:
        raise ValueError(_MST_ERRORS[int(heads[..., 0].min())])
    return heads


def decode_batch(arcs: np.ndarray, lengths: np.ndarray, method: str) -> np.ndarray:
    """(B, N) heads of a padded batch: sentence b is arcs[b, :lengths[b] + 1, :lengths[b] + 1].

    The same trees as `decode_heads` on each sentence, with one compiled call for the batch
    ("mst") or one argmax ("greedy"); padding is left at ROOT_HEAD.
    """
    if method not in _DECODERS:
        raise ValueError(f"unknown decoding method {method!r}; allowed: {sorted(_DECODERS)}")
    arcs = np.array(arcs, dtype=np.float64, copy=True)
    lengths = np.asarray(lengths, dtype=np.int64)
    if arcs.ndim != 3 or arcs.shape[1] != arcs.shape[2] or (lengths + 1 > arcs.shape[1]).any():
        raise ValueError(f"arcs must be (B, N, N) with every length < N, got {arcs.shape} and {lengths.max()}")
    n_units = arcs.shape[1]
    units = np.arange(n_units)
    outside = units[None, :] > lengths[:, None]  # (B, N) padding units
    arcs[:, 0, :] = -np.inf
    arcs[:, units, units] = -np.inf
    arcs[outside[:, :, None] | outside[:, None, :]] = -np.inf
    used = ~(outside[:, :, None] | outside[:, None, :])
    if np.isnan(arcs[used]).any():
        raise ValueError("scores contains NaN arc scores")
    if np.isposinf(arcs).any():
        raise ValueError("scores contains +inf arc scores; use -inf for disallowed arcs")
    if method == "greedy":
        heads = arcs.argmax(axis=2)
        heads[outside] = ROOT_HEAD
        heads[:, 0] = ROOT_HEAD
        return heads
    return _checked(_mst_batch(arcs, lengths))


def tree_score(scores: np.ndarray, heads: np.ndarray) -> float:
    """Total log-score of the arcs chosen by ``heads`` (words 1..n only)."""
    scores = np.asarray(scores)
    heads = np.asarray(heads)
    words = np.arange(1, heads.shape[0])
    return float(scores[words, heads[1:]].sum())


def is_single_rooted_tree(heads: np.ndarray) -> bool:
    """Whether ``heads`` (``heads[0]`` ignored) is one tree with a single ROOT child.

    Requires integer heads in ``0..n``, no self-loops, exactly one word headed
    by 0 and every word reaching 0 (no cycles): `validation.head_array_problem`.
    The empty sentence (n = 0) counts as a valid tree so that every ``mst_heads``
    output passes.
    """
    heads = np.asarray(heads)
    if heads.ndim != 1 or heads.size == 0 or not np.issubdtype(heads.dtype, np.integer):
        return False
    return heads.size == 1 or head_array_problem(heads[1:]) is None


_DECODERS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "mst": mst_heads,
    "greedy": greedy_heads,
}
DECODERS = tuple(_DECODERS)


def decode_heads(scores: np.ndarray, method: str) -> np.ndarray:
    """Decode the heads of one sentence with the named method ("mst" or "greedy")."""
    try:
        decoder = _DECODERS[method]
    except KeyError:
        raise ValueError(f"unknown decoding method {method!r}; allowed: {sorted(_DECODERS)}") from None
    return decoder(scores)
