"""spacy-pairatt: dependency parsing from a transformer's hidden states and pair-wise attention.

Importing the package is cheap: spaCy finds the factories, architectures and scorers through
setup.py entry points and imports the heavy modules only when a pipeline asks for them. The names
in `__all__` are the package's public API (docs/api.md lists each): the pipes, the data classes
they return or store, and the functions a user calls. Each loads from its module on first use
(PEP 562), so `import spacy_pairatt` still imports no spaCy or torch.

The confidence extensions (`doc._.pairatt_confidence`, `token._.head_prob`, ...) are registered as
soon as spaCy is loaded in a process that imported the package, so that Docs saved with confidence
(a DocBin with user data) read back before any pipeline is loaded.
"""

import importlib.abc
import importlib.util
import sys

from .about import __version__

# name -> the module (under spacy_pairatt) that defines it.
LAZY = {
    # pipes (and the base pipe and the tokenizer builder)
    "PairAttParser": "components.parser",
    "PairAttRelationExtractor": "components.relations",
    "PairScoringPipe": "components.base",
    "WordpieceBatchedTransformer": "components.transformer",
    "FrozenTransformer": "components.frozen_transformer",
    "AttentionRelease": "components.attention_release",
    "ParagraphSegmenter": "components.segmenter",
    "ud_english_tokenizer": "components.tokenizer",
    # data classes
    "ParseScores": "layers.parser_model",
    "RelationScores": "layers.relation_model",
    "ArcScores": "layers.pair_scorer",
    "DecodedChunk": "components.parser",
    "Relation": "integration.doc_relations",
    "SentenceConfidence": "integration.confidence",
    # functions
    "get_relations": "integration.doc_relations",
    "set_relations": "integration.doc_relations",
    "render_relations": "integration.doc_relations",
    "render_parse": "integration.confidence",
    "least_confident_sentences": "integration.confidence",
    "tree_marginals": "core.marginals",
    "decode_heads": "core.decoding",
    "precision_overrides": "layers.precision",
}
__all__ = ["__version__", *LAZY]


def __getattr__(name: str):
    if name in LAZY:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(LAZY))


def _register_extensions() -> None:
    from .integration.confidence import register_confidence_extensions

    register_confidence_extensions()


class _RegisterAfterSpacy(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds nothing itself: when spaCy is imported, lets the other finders load it, then registers the
    extensions, and steps out of `sys.meta_path`."""

    def find_spec(self, name, path, target=None):
        if name != "spacy":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            self.loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        _register_extensions()


if "spacy" in sys.modules:
    _register_extensions()
else:
    sys.meta_path.insert(0, _RegisterAfterSpacy())
