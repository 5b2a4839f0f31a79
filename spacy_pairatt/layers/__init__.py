"""Thinc models: the pair scorer, the parser and relation models that feed it from a transformer
listener, and their input batch (`pair_batch`: Docs and their TransformerData -> windows and unit groups)."""
