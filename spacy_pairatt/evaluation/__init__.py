"""Scores of trained pipelines: parsers on a .spacy corpus (`parser_eval`), relation extraction on
SemEval and Re-DocRED (`relation_eval`, with the official metrics that live beside those data sets in
corpora/), the CoNLL 2018 metrics of CoNLL-U files (`ud_eval`, `ud_treebank`), and their tables.
Nothing in the runtime imports this package."""
