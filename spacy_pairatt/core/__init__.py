"""The numeric core under the components and layers: wordpiece windows and their alignment to words,
pair features, losses, tree decoding, checks and the `doc._.relations` store. Arrays in, arrays out;
nothing here knows a spaCy pipe or a Thinc model, so each piece is tested without a pipeline."""
