"""spaCy pipeline components."""
