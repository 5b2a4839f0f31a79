"""pairatt_segmenter: spaCy's senter with the two things raw text needs that it lacks.

- A threshold on the probability of a sentence start (`start_probabilities`), chosen on dev,
  instead of the argmax: on web text the segmenter errs towards missing boundaries (a line without
  final punctuation, a signature), and where precision and recall meet is a setting, not a
  retraining.
- Whitespace: a paragraph break (a whitespace token holding a blank line) always ends a sentence,
  and a whitespace token never starts one, whatever the model says. Paragraph breaks are the
  strongest boundary signal raw text has; the model learns them too (its training Docs have them),
  the rule makes them certain.

Everything else, the model, training, loss and scorer, is spaCy's senter.
"""

from functools import partial
from typing import Callable, List, Optional

import numpy as np
from spacy.attrs import IS_SPACE
from spacy.language import Language
from spacy.pipeline.senter import SentenceRecognizer, senter_score
from spacy.tokens import Doc
from thinc.api import Model

from ..integration.load_settings import ConfigSetting, load_keeping
from ..integration.validation import check_settings
from .tokenizer import multiword_tokens

SENTENCE_START = 1  # the senter's label ids: 0 "I" (inside), 1 "S" (start)


# The architecture of configs/segmenter_standalone.cfg: hashed spelling features of each token (case survives
# in PREFIX, SUFFIX and SHAPE; SPACY is whether a space follows) through a BiLSTM over the Doc.
DEFAULT_SEGMENTER_MODEL = {
    "@architectures": "spacy.Tagger.v2",
    "nO": None,
    "normalize": False,
    "tok2vec": {
        "@architectures": "spacy.Tok2Vec.v2",
        "embed": {
            "@architectures": "spacy.MultiHashEmbed.v2",
            "width": 128,
            "attrs": ["NORM", "PREFIX", "SUFFIX", "SHAPE", "SPACY"],
            "rows": [5000, 1000, 2500, 1000, 4],
            "include_static_vectors": False,
        },
        "encode": {"@architectures": "spacy-pairatt.DropoutBiLSTMEncoder.v1", "width": 128, "depth": 2},
    },
}


@Language.factory(
    "pairatt_segmenter",
    assigns=["token.is_sent_start"],
    default_config={
        "model": DEFAULT_SEGMENTER_MODEL,
        "threshold": 0.5,
        "overwrite": False,
        "scorer": {"@scorers": "spacy.senter_scorer.v1"},
    },
    default_score_weights={"sents_f": 1.0, "sents_p": 0.0, "sents_r": 0.0},
)
def make_pairatt_segmenter(
    nlp: Language, name: str, model: Model, threshold: float, overwrite: bool, scorer: Optional[Callable]
) -> "ParagraphSegmenter":
    """threshold: a token starts a sentence when the model's probability of it is at least this;
    overwrite: replace sentence starts already set (False keeps a user's or a CoNLL-U file's)."""
    check_settings("pairatt_segmenter", threshold=threshold)
    return ParagraphSegmenter(nlp.vocab, model, name, threshold=threshold, overwrite=overwrite, scorer=scorer)


class ParagraphSegmenter(SentenceRecognizer):
    # Kept from the config over the saved cfg on loading (`integration.load_settings`); a tuned
    # threshold is set with `set_setting(nlp, name, "threshold", value)` (`segmenter-sweep --store`).
    CONFIG_SETTINGS = ("threshold", "overwrite")
    threshold = ConfigSetting()

    def __init__(
        self, vocab, model: Model, name: str = "senter", *, threshold: float = 0.5, overwrite=False, scorer=senter_score
    ):
        super().__init__(vocab, model, name, overwrite=overwrite, scorer=scorer)
        self.cfg["threshold"] = threshold

    def from_bytes(self, bytes_data, *, exclude=tuple()):
        return load_keeping(self, self.CONFIG_SETTINGS, partial(super().from_bytes, bytes_data, exclude=exclude))

    def from_disk(self, path, *, exclude=tuple()):
        return load_keeping(self, self.CONFIG_SETTINGS, partial(super().from_disk, path, exclude=exclude))

    def predict(self, docs: List[Doc]) -> List[np.ndarray]:
        """Each token's label id: 1 where it starts a sentence (see the module)."""
        if not any(len(doc) for doc in docs):
            return [np.zeros(0, dtype="int64") for doc in docs]
        return [
            sentence_starts(doc, probabilities, self.threshold)
            for doc, probabilities in zip(docs, self.start_probabilities(docs))
        ]

    def start_probabilities(self, docs: List[Doc], model: Optional[Model] = None) -> List[np.ndarray]:
        """Each token's probability of starting a sentence, per Doc: what the threshold is compared with;
        `model`: another in this one's place (`segmenter-sweep --members` scores an ensemble's first members).

        spaCy's `Tagger.v2` with `normalize = false` (spaCy's senter default, and this segmenter's)
        outputs logits at inference and probabilities only in training, so its output is put through
        the softmax here; a model whose output layer normalises (or that has none, like
        `TaggerEnsemble.v1`, which averages probabilities) is read as it is.
        """
        model = model or self.model
        ops = model.ops
        output_layer = model.get_ref("output_layer") if model.has_ref("output_layer") else None
        logits = output_layer is not None and not output_layer.attrs.get("softmax_normalize", True)
        scores = model.predict(docs)
        if logits:
            temperature = output_layer.attrs.get("softmax_temperature", 1.0)
            scores = [ops.softmax(doc_scores, temperature=temperature) for doc_scores in scores]
        return [ops.to_numpy(doc_scores)[:, SENTENCE_START] for doc_scores in scores]


def sentence_starts(doc: Doc, start_probabilities: np.ndarray, threshold: float) -> np.ndarray:
    """1 for each token that starts a sentence, else 0: the first token, a word whose probability
    is at least `threshold` or that follows a paragraph break; never a whitespace token, a word
    inside a multiword token (the `'s` of `Korea's`: UD writes one token, which a sentence cannot
    split), nor a word preceded by nothing but whitespace (leading whitespace belongs to the first
    sentence)."""
    starts = start_probabilities >= threshold
    if not len(doc):
        return starts.astype("int64")
    is_space = doc.to_array(IS_SPACE).astype(bool)
    paragraph_breaks = [i for i in np.flatnonzero(is_space[:-1]) if doc[int(i)].text.count("\n") >= 2]
    starts[np.asarray(paragraph_breaks, dtype="int64") + 1] = True
    starts &= ~is_space
    for run in multiword_tokens(doc[:]):
        starts[run.start + 1 : run.stop] = False
    words = np.flatnonzero(~is_space)
    starts[: (words[0] if len(words) else len(doc)) + 1] = False
    starts[0] = True
    return starts.astype("int64")
