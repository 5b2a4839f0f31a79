"""spacy-pairatt: dependency parsing from a transformer's hidden states and pair-wise attention.

Importing the package is cheap: spaCy finds the factories, architectures and scorers through
setup.py entry points and imports the heavy modules only when a pipeline asks for them.
"""

from .about import __version__

__all__ = ["__version__"]
