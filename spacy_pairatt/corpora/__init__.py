"""Data sets: where to get them and how to read them."""
