"""The numeric core under the components and layers: the alignment of wordpieces to words (alignment,
pooling), the arc-score layout they share (layout), losses (objectives), tree decoding (decoding),
tree probabilities (marginals) and checks of head arrays (tree_checks). Arrays in, arrays out: nothing
here takes a Doc, reads a config, registers a spaCy function or knows a pipe or a Thinc model, so each
piece is tested alone."""
