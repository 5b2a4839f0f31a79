"""The numeric core under the components and layers: which wordpiece windows the transformer reads
(span_getters), their alignment to words (alignment, pooling), the pair features (features), losses
(objectives), tree decoding (decoding), checks (validation), the `doc._.relations` store
(doc_relations) and the default encoder's path (encoders). Arrays in, arrays out; nothing here
imports a component or a Thinc model, so each piece is tested without a pipeline."""
