"""`pairatt_transformer`: spacy-transformers' `transformer`, batched by wordpieces.

The stock component groups a batch's Docs by their number of *tokens* and pads each group to its
longest window in *wordpieces*. With attention output that padding is quadratic: one 54-token
sentence of 337 wordpieces (a URL, an e-mail address) padded its 63 neighbours' attention to
337 x 337 per layer and head, about 2 GB for the batch, and made parsing EWT test 40% slower.
Grouping by the wordpieces of each Doc's longest window, with no window padded to more than
twice its length, keeps such Docs together, in prediction and in training (one forward and
backward pass per group). Its spans are also cut to fit the encoder's positions
(span_getters.WordpieceBoundedSpans), so no token is left without wordpieces. Same config,
model and weights as `transformer`; every listener works unchanged.

In training, its listeners' gradients may also carry attention gradients (one array per layer):
with the `spacy-pairatt.AttentionTransformerModel.v1` architecture they are summed per layer and
backpropagated through the attention weights, so the parser fine-tunes the transformer through
the a_ij features too. With the stock `TransformerModel.v3` its listeners are told that the
transformer takes no attention gradients, and the parser computes none: attention stays a
constant feature, as under spacy-transformers' `transformer`.

Loading a saved pipeline keeps the attention implementation its config asks for: spacy-transformers
rebuilds a saved transformer from its Hugging Face config, which does not store
`attn_implementation`, so transformers picks "sdpa" and only falls back to the eager attention
(with a warning) while `output_attentions` is on. An eager BERT, RoBERTa or MPNet self-attention,
the one that returns the attention weights, then runs in fewer passes (`layers/fused_attention.py`),
once the encoder is initialised or loaded. MPNet has only the eager attention: a config asking it
for "sdpa" fails at initialization with the key to set. Loading also puts back the float settings of
the saved Hugging Face config, which spacy-transformers reads through JSON rounded to ten decimals
(BERT's layer_norm_eps of 1e-12 came back as 0.0).
"""

from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Optional

import numpy as np
import srsly
import torch
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example, validate_examples
from spacy.util import minibatch
from spacy_transformers.data_classes import FullTransformerBatch, TransformerData
from spacy_transformers.layers import TransformerListener
from spacy_transformers.pipeline_component import DEFAULT_CONFIG, Transformer, install_extensions
from thinc.api import Model, Optimizer, get_array_module, set_dropout_rate, torch2xp
from transformers import AutoModel
from transformers.file_utils import ModelOutput

from ..integration.load_settings import load_keeping
from ..integration.span_getters import WordpieceBoundedSpans
from ..layers.attention_transformer import TAKES_ATTENTION_GRADIENTS, backprops_attentions
from ..layers.fused_attention import fuse_self_attention


@Language.factory(
    "pairatt_transformer",
    assigns=["doc._.trf_data"],
    default_config={**DEFAULT_CONFIG["transformer"], "learn_rate_scale": 1.0},
)
def make_pairatt_transformer(
    nlp: Language,
    name: str,
    model: Model[List[Doc], FullTransformerBatch],
    set_extra_annotations: Callable[[List[Doc], FullTransformerBatch], None],
    max_batch_items: int,
    learn_rate_scale: float,
):
    """spacy-transformers' `transformer` with batches grouped by wordpieces; learn_rate_scale: the
    encoder's learning rate as a multiple of the optimizer's (see `ScaledLearnRate`)."""
    return WordpieceBatchedTransformer(
        nlp.vocab,
        model,
        set_extra_annotations,
        max_batch_items=max_batch_items,
        name=name,
        learn_rate_scale=learn_rate_scale,
    )


class ScaledLearnRate:
    """An optimizer that updates with `scale` times the learning rate of the one it wraps.

    spaCy has one optimizer for a whole pipeline. Softmax heads that start from zero weights (the
    tagger, morphologizer, lemmatizer and senter) learn too slowly in 800 steps at a rate a
    pretrained encoder tolerates, so the pipeline config sets the heads' rate and scales the
    encoder's down (docs/ud_pipeline.md)."""

    def __init__(self, optimizer: Optimizer, scale: float):
        self.optimizer = optimizer
        self.scale = scale

    def __call__(self, key, weights, gradient, *, lr_scale: float = 1.0):
        return self.optimizer(key, weights, gradient, lr_scale=lr_scale * self.scale)


def padded_groups(widths: np.ndarray, rows: np.ndarray, max_items: int, max_stretch: float = 2.0) -> List[List[int]]:
    """Indices of Docs grouped by width (wordpieces of the longest window), ascending.

    A group holds at most max_items padded wordpieces (width x windows; a Doc wider than that is
    alone, as in spacy-transformers) and pads no window to more than max_stretch times the
    group's narrowest: attention grows with the square of the padded width.
    """
    groups: List[List[int]] = []
    group: List[int] = []
    group_rows = 0
    for index in np.argsort(widths, kind="stable"):
        if group and (
            widths[index] * (group_rows + rows[index]) > max_items or widths[index] > max_stretch * widths[group[0]]
        ):
            groups.append(group)
            group, group_rows = [], 0
        group.append(int(index))
        group_rows += int(rows[index])
    if group:
        groups.append(group)
    return groups


def split_by_doc(batch: FullTransformerBatch) -> List[TransformerData]:
    """`batch.split_by_doc()`, the same per-Doc TransformerData, without a dict of every Token.

    spacy-transformers numbers the batch's tokens through a dict keyed by `Token` objects, one made
    for every token of every Doc: a tenth of a MiniLM parse. A Doc's tokens are numbered after the
    tokens of the Docs before it, so its first and last positions come from the Docs' lengths.
    """
    model_output = ModelOutput()
    for key, output in batch.model_output.items():
        if isinstance(output, torch.Tensor):
            model_output[key] = torch2xp(output)
        elif isinstance(output, tuple) and all(
            isinstance(t, torch.Tensor) and t.shape[0] == batch.model_output.last_hidden_state.shape[0] for t in output
        ):
            model_output[key] = [torch2xp(t) for t in output]
    outputs, row, wordpieces_before, tokens_before = [], 0, 0, 0
    for doc_spans in batch.spans:
        doc_start = tokens_before
        if doc_spans:  # spacy-transformers numbers the tokens of the Docs with spans only
            tokens_before += len(doc_spans[0].doc)
        if not doc_spans or not len(doc_spans[0]):
            outputs.append(TransformerData.empty())
            continue
        end = row + len(doc_spans)
        doc_align = batch.align[doc_start + doc_spans[0].start : doc_start + doc_spans[-1].end]
        doc_align.data = doc_align.data - wordpieces_before
        wordpieces = batch.wordpieces[row:end]
        doc_output = ModelOutput()
        for key, output in model_output.items():
            doc_output[key] = [t[row:end] for t in output] if isinstance(output, list) else output[row:end]
        outputs.append(TransformerData(wordpieces=wordpieces, model_output=doc_output, align=doc_align))
        wordpieces_before += wordpieces.input_ids.size
        row = end
    return outputs


def with_doc_data(batch: FullTransformerBatch) -> FullTransformerBatch:
    """`batch` with its per-Doc split (`doc_data`) made by `split_by_doc`."""
    if batch.cached_doc_data is None and batch.spans:
        batch.cached_doc_data = split_by_doc(batch)
    return batch


def saved_encoder_config(model_bytes: Optional[bytes]) -> Dict:
    """The Hugging Face config inside a saved transformer model, at full precision ({} if none)."""
    for shims in srsly.msgpack_loads(model_bytes)["shims"] if model_bytes else ():
        for shim_bytes in shims:
            config = srsly.msgpack_loads(shim_bytes).get("config")
            if config:
                return config
    return {}


def restore_encoder(model: Model, requested: Optional[str], saved_config: Dict) -> None:
    """Rebuild a loaded transformer (same weights) where spacy-transformers' loading changed it: with
    the `attn_implementation` its transformer_config asked for, and the float settings of the saved
    config (`saved_encoder_config`) that came back rounded."""
    shim = model.layers[0].shims[0]
    loaded = shim._hfmodel.transformer
    if loaded is None:
        return
    rounded = {
        key: value
        for key, value in saved_config.items()
        if isinstance(value, float) and getattr(loaded.config, key, value) != value
    }
    implementation = requested or loaded.config._attn_implementation
    if not rounded and loaded.config._attn_implementation == implementation:
        return
    for key, value in rounded.items():
        setattr(loaded.config, key, value)
    rebuilt = AutoModel.from_config(loaded.config, attn_implementation=implementation)
    rebuilt.load_state_dict(loaded.state_dict())
    rebuilt.to(loaded.device).train(loaded.training)
    shim._model = shim._hfmodel.transformer = rebuilt


class WordpieceBatchedTransformer(Transformer):
    CONFIG_SETTINGS = ("max_batch_items",)  # spacy-transformers' cfg: kept from the config on loading

    def __init__(self, *args, learn_rate_scale: float = 1.0, **kwargs):
        super().__init__(*args, **kwargs)
        if not learn_rate_scale >= 0:
            raise ValueError(f"{self.name}: learn_rate_scale must be 0 or more, got {learn_rate_scale}")
        self.learn_rate_scale = learn_rate_scale
        if not isinstance(self.model.attrs["get_spans"], WordpieceBoundedSpans):
            self.model.attrs["get_spans"] = WordpieceBoundedSpans(self.model.attrs["get_spans"], self.model)

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp: Optional[Language] = None):
        requested = self.model._init_transformer_config.get("attn_implementation")
        try:
            super().initialize(get_examples, nlp=nlp)
        except ValueError as error:
            if requested in (None, "eager"):
                raise
            raise ValueError(
                f"{self.name}: the encoder {self.model.attrs.get('name')!r} cannot load with "
                f"attn_implementation = {requested!r} ({error}). Set [components.{self.name}.model.transformer_config] "
                'attn_implementation = "eager" (MPNet has only the eager attention)'
            ) from error
        fuse_self_attention(self.model.transformer)

    def _loaded(self, load: Callable[[], None], saved_model: Callable[[], Optional[bytes]]):
        """Run spacy-transformers' loading, then give the encoder the attention its config asks
        for and its saved config's exact floats (`restore_encoder`), fused where it is eager. The cfg
        (max_batch_items) stays the config's (`load_keeping`): loading would put the saved one back
        over a load-time override. An uninitialized pipe loaded without its model has no encoder to restore."""
        requested = self.model._init_transformer_config.get("attn_implementation")
        load_keeping(self, self.CONFIG_SETTINGS, load)
        if self.model.transformer is not None:
            restore_encoder(self.model, requested, saved_encoder_config(saved_model()))
            fuse_self_attention(self.model.transformer)
        return self

    def from_bytes(self, bytes_data, *, exclude=tuple()):
        return self._loaded(
            lambda: super(WordpieceBatchedTransformer, self).from_bytes(bytes_data, exclude=exclude),
            lambda: None if "model" in exclude else srsly.msgpack_loads(bytes_data).get("model"),
        )

    def from_disk(self, path, *, exclude=tuple()):
        model_path = Path(path) / "model"
        return self._loaded(
            lambda: super(WordpieceBatchedTransformer, self).from_disk(path, exclude=exclude),
            lambda: None if "model" in exclude or not model_path.is_file() else model_path.read_bytes(),
        )

    def window_sizes(self, docs: List[Doc]):
        """(widths, rows): each Doc's longest window in wordpieces and its number of windows."""
        nested_spans, lengths = self.model.attrs["get_spans"].spans_and_lengths(docs)
        lengths = lengths + self.model.tokenizer.num_special_tokens_to_add(pair=False)
        rows = np.array([len(spans) for spans in nested_spans], dtype="int64")
        ends = np.cumsum(rows)
        widths = np.array([max(lengths[end - n : end], default=0) for end, n in zip(ends, rows)], dtype="int64")
        return widths, rows

    def predict(self, docs: Iterable[Doc]) -> FullTransformerBatch:
        return with_doc_data(super().predict(docs))

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        install_extensions()
        for outer_batch in minibatch(stream, batch_size):
            outer_batch = list(outer_batch)
            widths, rows = self.window_sizes(outer_batch)
            for indices in padded_groups(widths, rows, self.cfg["max_batch_items"]):
                group = [outer_batch[i] for i in indices]
                self.set_annotations(group, self.predict(group))
            yield from outer_batch

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """`Transformer.update`, with gradients that may carry attentions as well as last_hidden_state,
        and one forward pass per group of Docs of similar wordpiece width (`width_groups`).

        As in spacy-transformers, every listener but the last adds its gradient and the last one
        backpropagates the sum and calls the optimizer; listeners sending only d last_hidden_state
        (the stock TransformerListener) are unaffected. The callbacks say whether the model takes
        attention gradients (`TransformerDataListener.upstream_takes_attention_gradients`).
        """
        validate_examples(examples, "Transformer.update")
        losses = {} if losses is None else losses
        docs = [eg.predicted for eg in examples]
        if not any(len(doc) for doc in docs):
            return losses
        set_dropout_rate(self.model, drop)
        batches = []
        for group in self.width_groups(docs):
            trf_full, backprop_group = self.model.begin_update([docs[i] for i in group])
            batches.append((group, with_doc_data(trf_full), backprop_group))
        doc_data: List[TransformerData] = [TransformerData.empty()] * len(docs)
        for group, trf_full, _ in batches:
            for index, data in zip(group, trf_full.doc_data):
                doc_data[index] = data
        has_output = np.array(["last_hidden_state" in data.model_output for data in doc_data])
        gradient_slot = np.cumsum(has_output) - 1  # listeners send one gradient per Doc with output
        losses.setdefault(self.name, 0.0)
        takes_attentions = backprops_attentions(self.model)
        sums: List[List] = []

        def accumulate_gradient(d_trf_datas: List[TransformerData]) -> None:
            """Add a listener's gradients; all but the last listener get this callback."""
            if not takes_attentions and any("attentions" in d.model_output for d in d_trf_datas):
                raise ValueError(
                    f"{self.name}: a listener sent attention gradients, but only the "
                    "spacy-pairatt.AttentionTransformerModel.v1 architecture can backpropagate them"
                )
            losses[self.name] += add_gradients(sums, d_trf_datas)

        def backprop(d_trf_datas: List[TransformerData]) -> List[Doc]:
            """Add the last listener's gradients, backpropagate the sum and update the weights."""
            nonlocal sums
            accumulate_gradient(d_trf_datas)
            for group, trf_full, bp_trf_full in batches:
                group_sums = [sums[gradient_slot[index]] for index in group if has_output[index]]
                if group_sums:
                    bp_trf_full(trf_full.unsplit_by_doc(doc_gradient_arrays(trf_full, group_sums)))
            if sgd is not None:
                self.finish_update(sgd)
            sums = []
            return docs

        for callback in (accumulate_gradient, backprop):
            setattr(callback, TAKES_ATTENTION_GRADIENTS, takes_attentions)
        batch_id = TransformerListener.get_batch_id(docs)
        for listener in self.listeners[:-1]:
            listener.receive(batch_id, doc_data, accumulate_gradient)
        if self.listeners:
            self.listeners[-1].receive(batch_id, doc_data, backprop)
        return losses

    def finish_update(self, sgd: Optimizer) -> None:
        """Update the encoder at `learn_rate_scale` times the optimizer's learning rate."""
        self.model.finish_update(sgd if self.learn_rate_scale == 1.0 else ScaledLearnRate(sgd, self.learn_rate_scale))

    def width_groups(self, docs: List[Doc]) -> List[List[int]]:
        """Indices of `docs` grouped by wordpiece width (`padded_groups`), each group one forward pass.

        One pass over a whole training batch padded every window to the batch's widest: a batch
        of 133 short sentences with one long URL grew the peak RSS by 2.7 GB. Empty Docs join the first
        group (spacy-transformers gives them empty output there).
        """
        filled = [index for index, doc in enumerate(docs) if len(doc)]
        empty = [index for index, doc in enumerate(docs) if not len(doc)]
        widths, rows = self.window_sizes([docs[index] for index in filled])
        groups = [[filled[i] for i in group] for group in padded_groups(widths, rows, self.cfg["max_batch_items"])]
        groups[0] = empty + groups[0]
        return groups


def add_gradients(sums: List[List], d_trf_datas: List[TransformerData]) -> float:
    """Add each Doc's gradients to sums[i] = [d last_hidden_state, d attentions per layer or None].

    Docs are matched by position, as in spacy-transformers. Returns the squared norm of the
    added gradients, what spacy-transformers reports as the transformer's loss.
    """
    norm = 0.0
    for i, d_trf_data in enumerate(d_trf_datas):
        d_hidden = d_trf_data.model_output["last_hidden_state"]
        d_attentions = d_trf_data.model_output.get("attentions")
        norm += float((d_hidden**2).sum()) + sum(float((d_layer**2).sum()) for d_layer in d_attentions or ())
        if i == len(sums):
            sums.append([d_hidden, d_attentions])
            continue
        sums[i][0] += d_hidden
        if d_attentions is not None and sums[i][1] is None:
            sums[i][1] = d_attentions
        elif d_attentions is not None:
            for total, d_layer in zip(sums[i][1], d_attentions):
                total += d_layer
    return norm


def doc_gradient_arrays(trf_full: FullTransformerBatch, sums: List[List]) -> List[List]:
    """Per Doc [d last_hidden_state, d attentions of layer 0, ...], what `unsplit_by_doc` stacks.

    The attention gradients are left out when no listener sent any, else zeros stand in for the
    Docs without them.
    """
    if all(d_attentions is None for _, d_attentions in sums):
        return [[d_hidden] for d_hidden, _ in sums]
    outputs = [data.model_output for data in trf_full.doc_data if "last_hidden_state" in data.model_output]
    return [
        [d_hidden, *(d_attentions or [get_array_module(layer).zeros_like(layer) for layer in output["attentions"]])]
        for (d_hidden, d_attentions), output in zip(sums, outputs)
    ]
