"""The checkout's docs tool, not part of the installed package (`python -m docs_build`): it writes the generated
blocks of README.md and docs/*.md and the shipped model card's notes from results/, as plan.json says. It
imports neither spaCy, torch nor numba, nor spacy_pairatt's command line."""
