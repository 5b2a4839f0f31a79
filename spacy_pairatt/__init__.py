"""spacy-pairatt: dependency parsing from a transformer's hidden states and pair-wise attention.

Importing the package is cheap: spaCy finds the factories, architectures and scorers through
setup.py entry points and imports the heavy modules only when a pipeline asks for them. The names
in `__all__` are the package's public API (docs/api.md lists each): the pipes, the data classes
they return or store, and the functions a user calls. Each loads from its module on first use
(PEP 562), so `import spacy_pairatt` still imports no spaCy or torch.

Importing it changes nothing in the process either: the Doc, Token and Span extensions
(`doc._.pairatt_confidence`, `token._.head_prob`, `doc._.relations`, ...) are registered by
`register_extensions()`, which every pipe and reader calls; code that reads saved Docs before any
pipe is built calls it itself.
"""

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
    "SentenceConfidence": "integration.doc_confidence",
    # functions
    "get_relations": "integration.doc_relations",
    "set_relations": "integration.doc_relations",
    "render_relations": "integration.doc_relations",
    "render_parse": "integration.doc_confidence",
    "least_confident_sentences": "integration.doc_confidence",
    "tree_marginals": "core.marginals",
    "decode_heads": "core.decoding",
    "precision_overrides": "layers.precision",
    "set_setting": "integration.load_settings",
    "register_extensions": "integration.extensions",
}
__all__ = ["__version__", *LAZY]


def __getattr__(name: str):
    if name in LAZY:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(LAZY))
