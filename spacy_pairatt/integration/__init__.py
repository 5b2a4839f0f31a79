"""The spaCy-facing helpers under the pipes of `components`: what takes Docs, Examples or a
pipeline's config, registers a spaCy function, or sets up the process.

- features: Docs and their TransformerData -> the windows and unit groups the pair scorer pools;
- span_getters: which token windows the transformer reads (`spacy-pairatt.sent_windows.v1`);
- doc_relations: the `doc._.relations` store, its `Relation` type and its displaCy view;
- extensions: every Doc, Token and Span extension, registered by one idempotent call (`register_extensions`);
- validation: checks of gold Docs, the transformer output, dev corpora and numeric settings;
- scoring: the metrics scorers (`spacy-pairatt.parser_scorer.v1`, `spacy-pairatt.relation_scorer.v1`);
- pipe_setup: a component's default [model], fork-safe torch, the upstream transformer's sizes;
- forking: the fork hook; memory: bounded memory, opt-in: the allocator, the training heap bound
  (`spacy-pairatt.training_heap_bound.v1`) and parsing's (`spacy-pairatt.bounded_memory.v1`);
- load_settings: spaCy's own pipes keep their load-time settings (`spacy-pairatt.keep_config_settings.v1`);
- encoders: the default encoder's path (`spacy-pairatt.minilm_path.v1`).
"""
