"""Thinc models: the pair scorer and the parser model that feeds it from a transformer listener."""
