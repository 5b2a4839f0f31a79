"""Scores of trained pipelines: parsers on a .spacy corpus (`parser_eval`), relation extraction with the
benchmarks' official metrics (`relation_eval`, `relation_metrics`), the CoNLL 2018 metrics of CoNLL-U
files (`ud_eval`), and the tables made from them. Nothing in the runtime imports this package."""
