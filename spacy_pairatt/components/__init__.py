"""spaCy pipeline components, the pipes a pipeline's config names: `pairatt_parser` (parser),
`pairatt_rel` (relations), `pairatt_transformer` and `pairatt_frozen_transformer` (transformer,
frozen_transformer), `pairatt_release_attention` (attention_release), `pairatt_segmenter` (segmenter),
the opt-in `pairatt_bounded_memory` (bounded_memory), the base pipe they share (base), what building
them needs (pipe_setup, forking) and the UD English tokenizer (tokenizer). The Doc stores and checks
they use live in `integration`."""
