"""`python -m spacy_pairatt parse`: a pipeline over text or CoNLL-U files, read lazily and written as
parsed, in one process, in forked workers or as Dask shards. The parser itself is components/."""
