"""spaCy pipeline components, the pipes a pipeline's config names: `pairatt_parser` (parser),
`pairatt_rel` (relations), `pairatt_transformer` and `pairatt_frozen_transformer` (transformer,
frozen_transformer), `pairatt_release_attention` (attention_release), the base pipe they share
(base) and the UD English tokenizer (tokenizer). What they use from spaCy lives in `integration`."""
