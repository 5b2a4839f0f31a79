"""Pair features of eq. 5 for a batch: the transformer's windows as torch tensors, and the groups to pool.

The pair scorer never sees the N x N x (2M + 2LH) concatenation: it gets the pooled word vectors
and the word-level attention as per-window blocks (`pooling.WordAttention`), and sums per-part
linear maps (see `torch_scorers`). This module turns Docs and their `TransformerData`
into what the scorer pools: every Doc's windows in buckets on the transformer's device (views of
its output where they can be, no copy to the host), and the token groups (sentences or entities)
that make the units.
"""

import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from spacy.pipeline import Sentencizer
from spacy.tokens import Doc
from thinc.api import torch2xp

from ..core.alignment import BlockAlignment, DocAlignments, Groups, align_blocks, ragged_arange
from ..core.pooling import bucket_windows, pool_attention, pool_hidden
from ..integration.span_getters import sentence_spans
from ..integration.validation import MissingAttentionError, transformer_output_problem, transformer_ran

# A Doc without sentence boundaries is one sentence, and one tree, up to this many tokens. A
# longer one is split where spaCy's rule-based sentencizer finds sentence ends (and pieces still
# longer are cut into nearly equal parts), with a warning: its n x n pair scores would need
# gigabytes. Sentences the Doc has (set by a senter, a sentencizer or the data) are never cut.
MAX_UNSEGMENTED_TOKENS = 2048

_SENTENCIZER = Sentencizer()


def doc_sentences(doc: Doc) -> List[Tuple[int, int]]:
    """(start, end) token offsets of the units the parser decodes as one tree each.

    The Doc's sentence boundaries when it has them, else the whole Doc; an unsegmented Doc over
    MAX_UNSEGMENTED_TOKENS is segmented as described there, with a warning naming it.
    """
    spans = [(span.start, span.end) for span in sentence_spans(doc)]
    if doc.has_annotation("SENT_START") or len(doc) <= MAX_UNSEGMENTED_TOKENS:
        return spans
    warnings.warn(
        f"pairatt_parser: a Doc of {len(doc)} tokens without sentence boundaries ({doc.text[:40]!r}...) is "
        f"longer than {MAX_UNSEGMENTED_TOKENS} tokens; it is parsed as the sentences spaCy's rule-based "
        "sentencizer finds. Put a senter or sentencizer before the parser to choose the sentences.",
        stacklevel=2,
    )
    starts = np.flatnonzero(np.asarray(_SENTENCIZER.predict([doc])[0], dtype=bool))
    bounds = np.unique(np.concatenate([[0], starts, [len(doc)]]))
    return [piece for start, end in zip(bounds[:-1], bounds[1:]) for piece in _even_pieces(int(start), int(end))]


def _even_pieces(start: int, end: int) -> List[Tuple[int, int]]:
    """[start, end) cut into consecutive pieces of nearly equal length, none over MAX_UNSEGMENTED_TOKENS."""
    n_pieces = -(-(end - start) // MAX_UNSEGMENTED_TOKENS)
    bounds = start + (np.arange(n_pieces + 1) * (end - start)) // n_pieces
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))


@dataclass
class WindowBatch:
    """The transformer's output for a batch of Docs, every Doc's windows in buckets on its device.

    Windows are numbered by the width of their Doc's transformer sub-batch, then by where the Doc's
    output lies in memory (the sub-batch's own order), so that windows of one width are consecutive
    and a bucket can be a view of one transformer pass (`pooling.bucket_windows`). hidden: the last
    hidden state [(W_b, P_b, M)] per bucket; attention: [[(W_b, H, P_b, P_b)] per layer] per bucket,
    or None when not used; alignments: every Doc's token -> wordpiece map in that window numbering;
    doc_windows / doc_widths / doc_first_window: each Doc's W_d, P_d and first window (0 windows for
    Docs without output); projected: the attention buckets' projections that the batch's chunks
    share at inference (`pooling.WordAttention.projected`), filled as they are scored.
    """

    hidden: List[torch.Tensor]
    attention: Optional[List[List[torch.Tensor]]]
    alignments: DocAlignments
    doc_windows: List[int]
    doc_widths: List[int]
    doc_first_window: List[int]
    projected: Dict[Tuple, torch.Tensor] = field(default_factory=dict, repr=False)

    def bucket_of(self, window: int) -> Tuple[int, int]:
        """(bucket, row in it) of global window `window`."""
        starts = np.cumsum([0] + [len(bucket) for bucket in self.hidden])
        bucket = int(np.searchsorted(starts, window, side="right")) - 1
        return bucket, window - int(starts[bucket])


def window_batch(docs: Sequence[Doc], trf_datas, use_attention: bool, needed: Sequence[bool]) -> WindowBatch:
    """Stack the outputs of the Docs marked `needed` (the others, e.g. empty Docs, contribute nothing)."""
    outputs = {
        index: _doc_outputs(index, doc, trf_data, use_attention)
        for index, (doc, trf_data, used) in enumerate(zip(docs, trf_datas, needed))
        if used
    }
    doc_windows = [outputs[i][0].shape[0] if i in outputs else 0 for i in range(len(docs))]
    doc_widths = [outputs[i][0].shape[1] if i in outputs else 0 for i in range(len(docs))]
    order = sorted(outputs, key=lambda index: (doc_widths[index], _address(outputs[index][0])))
    first_window = np.zeros(len(docs), dtype="int64")
    first_window[order] = np.cumsum([0] + [doc_windows[i] for i in order])[:-1]
    hidden, attention = bucket_windows(
        [outputs[i][0] for i in order], [outputs[i][1] for i in order] if use_attention else None
    )
    return WindowBatch(
        hidden=hidden,
        attention=attention if order else None,
        alignments=DocAlignments.from_docs(
            *zip(*(_doc_alignment(doc, trf_data, used) for doc, trf_data, used in zip(docs, trf_datas, needed))),
            windows=list(zip(doc_windows, doc_widths)),
            first_windows=first_window,
        ),
        doc_windows=doc_windows,
        doc_widths=doc_widths,
        doc_first_window=first_window.tolist(),
    )


def _address(array) -> int:
    """Where a numpy array's data begins (0 for other arrays): the order of one pass's per-Doc views."""
    return array.__array_interface__["data"][0] if isinstance(array, np.ndarray) else 0


def _doc_alignment(doc: Doc, trf_data, used: bool) -> Tuple[np.ndarray, np.ndarray]:
    """(wordpieces per token, their flat positions) of one Doc; none for a Doc without output."""
    if not used:
        return np.zeros(len(doc), dtype="int64"), np.zeros(0, dtype="int64")
    lengths = np.asarray(trf_data.align.lengths, dtype="int64")
    return borrowed_wordpieces(doc, lengths, np.asarray(trf_data.align.dataXd, dtype="int64").ravel())


def borrowed_wordpieces(doc: Doc, lengths: np.ndarray, positions: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """The alignment with a word for every token that is not whitespace.

    The encoder's tokenizer drops zero-width, format (U+200B, U+200D, U+FEFF), combining (U+0301)
    and control characters, so a token made only of them owns no wordpiece and would be scored from
    nothing. Such a token takes the wordpieces of the nearest token before it that has some (Unicode
    joins these characters to the one before them), or after it at the start of a Doc, as `do` and
    `n't` share `don`. Whitespace tokens keep none (they are no words). Only a Doc where no token
    has a wordpiece leaves them without, for the scorer's learned placeholder (PairIndicators).
    """
    empty = np.flatnonzero(lengths == 0)  # tested first: a Doc's tokens are read only where some own nothing
    wordless = [int(i) for i in empty if not doc[int(i)].is_space]
    donors = np.flatnonzero(lengths)
    if not wordless or not len(donors):
        return lengths, positions
    starts = np.cumsum(lengths) - lengths
    pieces = [positions[start : start + n] for start, n in zip(starts, lengths)]
    for i in wordless:
        before = donors[donors < i]
        pieces[i] = pieces[before[-1] if len(before) else donors[0]]
    return np.array([len(piece) for piece in pieces], dtype="int64"), np.concatenate(pieces)


def _doc_outputs(doc_index: int, doc: Doc, trf_data, use_attention: bool):
    """(hidden (W, P, M), attention per layer [(W, H, P, P)] or None) of one Doc as the transformer gave
    them (numpy or cupy: `pooling.bucket_windows` makes them tensors), checked."""
    problem = transformer_output_problem(trf_data, use_attention)
    if problem is not None:
        error = MissingAttentionError if transformer_ran(trf_data) else ValueError
        raise error(f"pairatt: Doc {doc_index} ({len(doc)} tokens): {problem}")
    if len(trf_data.align.lengths) != len(doc):
        raise ValueError(
            f"pairatt: the transformer alignment covers {len(trf_data.align.lengths)} tokens but Doc {doc_index} "
            f"has {len(doc)}; the Doc was changed after the transformer ran"
        )
    output = trf_data.model_output
    return output["last_hidden_state"], list(output["attentions"]) if use_attention else None


def split_window_gradients(
    windows: WindowBatch, d_hidden: List[torch.Tensor], d_attention: Optional[List[List[torch.Tensor]]]
):
    """Per-Doc (d last_hidden_state (W_d, P_d, M), d attentions [(W_d, H, P_d, P_d)] or None), xp arrays;
    None for Docs without output. d_hidden, d_attention: one gradient per bucket of `windows`."""
    grads = []
    for n_windows, first in zip(windows.doc_windows, windows.doc_first_window):
        if n_windows == 0:
            grads.append(None)
            continue
        bucket, row = windows.bucket_of(first)
        rows = slice(row, row + n_windows)
        doc_attention = None if d_attention is None else [torch2xp(d[rows].contiguous()) for d in d_attention[bucket]]
        grads.append((torch2xp(d_hidden[bucket][rows].contiguous()), doc_attention))
    return grads


@dataclass
class PairBatch:
    """One chunk of groups for the scorer: the batch's windows and how to pool this chunk from them.

    attention_requires_grad: the scorer's backprop returns the gradient of the window attention
    too (only worth its cost when the transformer is fine-tuned through attention).
    """

    windows: WindowBatch
    alignment: BlockAlignment  # numpy, from alignment.align_blocks
    attention_requires_grad: bool = False

    @property
    def mask(self) -> np.ndarray:
        """(S, N) 1.0 for real units, root included."""
        return self.alignment.mask


def chunk_batch(windows: WindowBatch, groups: Groups, chunk: Sequence[int], attention_requires_grad: bool):
    """The PairBatch of the listed groups."""
    alignment = align_blocks(windows.alignments, groups.subset(chunk))
    return PairBatch(windows, alignment, attention_requires_grad and windows.attention is not None)


def parser_groups(docs: Sequence[Doc]) -> Tuple[Groups, List[Tuple[int, int, int]]]:
    """One group per sentence of every Doc, and (doc index, start, n words) of each."""
    sentences = [(index, start, end - start) for index, doc in enumerate(docs) for start, end in doc_sentences(doc)]
    columns = np.array(sentences, dtype="int64").reshape(-1, 3).T
    return Groups.sentences(*columns), sentences


def entity_groups(entities: Sequence[Sequence[Sequence[Tuple[int, int]]]]) -> Groups:
    """One group per Doc with at least two entities (so at least one pair); unit u >= 1 is entity u - 1.

    entities[d] lists Doc d's entities, each a list of mention offsets (start, end). An entity's
    vector is the mean over the wordpieces of all its mentions; its attention to another entity
    is the mean over its own wordpieces of the attention summed over the other's wordpieces, so
    both directions of a pair are pooled over all token pairs of the two entities.
    """
    docs = [index for index, doc_entities in enumerate(entities) if len(doc_entities) >= 2]
    mentions = [
        (group, unit, start, end)
        for group, doc in enumerate(docs)
        for unit, doc_mentions in enumerate(entities[doc], start=1)
        for start, end in doc_mentions
    ]
    group, unit, start, end = np.array(mentions, dtype="int64").reshape(-1, 4).T
    n_tokens = end - start
    return Groups(
        doc=np.array(docs, dtype="int64"),
        n_units=np.array([len(entities[doc]) + 1 for doc in docs], dtype="int64"),
        token_group=np.repeat(group, n_tokens),
        token_index=ragged_arange(start, n_tokens),
        token_unit=np.repeat(unit, n_tokens),
    )


@dataclass
class UnitFeatures:
    """One group's pooled features as numpy, for tooling (probing, pictures, kept attention maps).

    hidden (n+1, M); attention (L*H, n+1, n+1) or None; unit 0 is the root.
    """

    doc_index: int
    hidden: np.ndarray
    attention: Optional[np.ndarray]

    @property
    def n_units(self) -> int:
        return self.hidden.shape[0]


def sentence_features(docs: List[Doc], trf_datas, use_attention: bool) -> Tuple[List[UnitFeatures], list]:
    """Every sentence's word features as numpy, in Doc order, and (doc index, start, n words) of each.

    Runs the scorer's own pooling (one implementation) and copies the result to the host.
    """
    groups, sentences = parser_groups(docs)
    if not sentences:
        return [], []
    needed = [len(doc) > 0 for doc in docs]
    windows = window_batch(docs, trf_datas, use_attention, needed)
    alignment = align_blocks(windows.alignments, groups).to_torch(windows.hidden[0].device)
    with torch.no_grad():
        hidden = pool_hidden(windows.hidden, alignment).cpu().numpy()
        attention = pool_attention(windows.attention, alignment).dense().cpu().numpy() if use_attention else None
    features = [
        UnitFeatures(doc, hidden[g, : n + 1], None if attention is None else attention[g, :, : n + 1, : n + 1])
        for g, (doc, _, n) in enumerate(sentences)
    ]
    return features, sentences
