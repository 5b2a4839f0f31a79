"""spacy-pairatt: dependency parsing from a transformer's hidden states and pair-wise attention.

Importing the package is cheap: spaCy finds the factories, architectures and scorers through
setup.py entry points and imports the heavy modules only when a pipeline asks for them. The names
below are the package's public API; `Relation` and `render_relations` (the type of `doc._.relations`
and its displaCy view), `tree_marginals` (arc probabilities under all single-root trees) and
`render_parse` (displaCy arcs labelled with the parser's confidence) load on first use, so
`import spacy_pairatt` still imports no spaCy or torch.
"""

from .about import __version__

__all__ = ["Relation", "__version__", "render_parse", "render_relations", "tree_marginals"]
LAZY = {
    "Relation": "core.doc_relations",
    "render_relations": "core.doc_relations",
    "render_parse": "confidence",
    "tree_marginals": "core.marginals",
}


def __getattr__(name: str):
    if name in LAZY:
        from importlib import import_module

        return getattr(import_module(f"{__name__}.{LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
