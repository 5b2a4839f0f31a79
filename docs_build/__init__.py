"""The checkout's docs tool, not part of the installed package: it writes the generated blocks of README.md and
docs/*.md and the shipped model card's notes from results/ (`python -m spacy_pairatt docs-tables`, which finds
it here). It imports neither spaCy, torch nor numba."""
