"""Every Doc, Token and Span extension of the package, registered by one idempotent call.

Each pipe, reader and converter that reads or writes an extension calls `register_extensions()`, so
`spacy.load(path)` and `nlp.add_pipe(...)` register them all; code that reads saved Docs before any
pipe is built (a DocBin with user data) calls it itself, as spacy-transformers' `install_extensions()`.
"""

from spacy.tokens import Doc

from .doc_confidence import register_confidence_extensions
from .doc_relations import register_relations_extension

ATTENTION = "pairatt_attention"  # the word-level attention `pairatt_release_attention` keeps


def register_extensions() -> None:
    """Register `doc._.pairatt_confidence` and its Token / Span getters, `doc._.relations` and
    `doc._.pairatt_attention`; one already registered is left as it is."""
    register_confidence_extensions()
    register_relations_extension()
    if not Doc.has_extension(ATTENTION):
        Doc.set_extension(ATTENTION, default=None)
