"""Training: the functions a training config names (the reader `corpus`, the augmenter `augment`, the
`callbacks`, the learning-rate `schedules`) and, beyond `spacy train`, runs that checkpoint and resume
(`resumable.py`, docs/training.md)."""
