"""What building `pairatt_parser` and `pairatt_rel` needs from spaCy and the process: the default
[model] config, fork-safe torch, and the upstream transformer's sizes."""

from typing import Optional, Tuple

from spacy.language import Language
from spacy.pipeline import TrainablePipe
from thinc.api import Config

from ..integration.validation import ATTENTION_CONFIG_HINT, MissingAttentionError
from .forking import single_threaded_torch_after_fork


def default_model(architecture: str, pair_scorer: str) -> Config:
    """A component's default [model]: `architecture` reading the shared transformer through the
    listener, with `pair_scorer` (the lines of its [model.pair_scorer] section)."""
    return Config().from_str(
        f"""
[model]
@architectures = "{architecture}"
grad_factor = 1.0

[model.tok2vec]
@architectures = "spacy-pairatt.TransformerDataListener.v1"
upstream = "*"

[model.pair_scorer]
{pair_scorer}
"""
    )["model"]


def prepare_process() -> None:
    """What a process running these components needs: fork-safe torch (n_process).

    The allocator is left as it is: bounded memory is the user's choice (`integration/memory.py`).
    """
    single_threaded_torch_after_fork()


def upstream_transformer_dims(component: TrainablePipe, nlp: Optional[Language]) -> Tuple[int, int, int]:
    """(hidden width, layers, heads) of the transformer feeding this component's listener.

    Fails with the config keys to set when there is none or when it does not output attention.
    """
    listener = component.model.get_ref("tok2vec")
    upstream = None
    if nlp is not None:
        for _, proc in nlp.pipeline:
            if listener in getattr(proc, "listeners", ()):
                upstream = proc
                break
    if upstream is None:
        raise ValueError(
            f"'{component.name}': no spacy-transformers 'transformer' component feeds its listener "
            f"(upstream = {listener.upstream_name!r}). Add one before it, e.g. "
            f'nlp.add_pipe("transformer", config=...), with attention output on.\n' + ATTENTION_CONFIG_HINT
        )
    config = upstream.model.transformer.config
    uses_attention = component.model.get_ref("pair_scorer").attrs["use_attention"]
    if uses_attention and not (config.output_attentions and config._attn_implementation == "eager"):
        raise MissingAttentionError(
            f"'{component.name}': the transformer '{upstream.name}' does not output attention weights "
            f"(output_attentions={config.output_attentions}, "
            f"attn_implementation={config._attn_implementation!r}).\n" + ATTENTION_CONFIG_HINT
        )
    return config.hidden_size, config.num_hidden_layers, config.num_attention_heads
