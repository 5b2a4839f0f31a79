"""Training beyond `spacy train`: runs that checkpoint and resume (`resumable.py`, docs/training.md)."""
