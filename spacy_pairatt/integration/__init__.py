"""The spaCy-facing helpers under `layers` and the pipes of `components`: the Doc stores, the checks
and the registered helpers, one job a module.

- doc_confidence: the `doc._.pairatt_confidence` store, its Token / Span getters and its displaCy view;
- doc_relations: the `doc._.relations` store, its `Relation` type and its displaCy view;
- extensions: every Doc, Token and Span extension, registered by one idempotent call (`register_extensions`);
- validation: checks of gold Docs, the transformer output (`MissingAttentionError`), dev corpora and
  numeric settings;
- span_getters: which token windows the transformer reads (`spacy-pairatt.sent_windows.v1`);
- scoring: the metrics scorers (`spacy-pairatt.parser_scorer.v1`, `spacy-pairatt.relation_scorer.v1`);
- memory: bounded memory, opt-in: the allocator, and the heap bounds that training
  (`training/callbacks.py`) and the `pairatt_bounded_memory` pipe (`components/bounded_memory.py`) set;
- load_settings: spaCy's own pipes keep their load-time settings (`spacy-pairatt.keep_config_settings.v1`);
- encoders: the default encoder's path (`spacy-pairatt.minilm_path.v1`).
"""
