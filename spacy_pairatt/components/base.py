"""What `pairatt_parser` and `pairatt_rel` share: a pair scorer whose size is known only after
`initialize` (or from the saved cfg), fed by a listener to an upstream transformer with attention."""

from pathlib import Path
from typing import Optional, Tuple

import srsly
from spacy.language import Language
from spacy.pipeline import TrainablePipe

from ..features import ATTENTION_CONFIG_HINT, MissingAttentionError
from ..forking import single_threaded_torch_after_fork
from ..memory import limit_heap_fragmentation


def prepare_process() -> None:
    """What a process running these components needs: flat memory, fork-safe torch (n_process)."""
    limit_heap_fragmentation()
    single_threaded_torch_after_fork()


class PairScoringPipe(TrainablePipe):
    """A TrainablePipe whose model has refs "tok2vec" (a TransformerListener) and "scorer"."""

    def _set_dims(self, nlp: Optional[Language], n_outputs: int) -> None:
        """Size the scorer from the upstream transformer and the label count, then build it."""
        hidden_width, n_layers, n_heads = upstream_transformer_dims(self, nlp)
        self.cfg["dims"] = {"nI": hidden_width, "nA": n_layers * n_heads, "nO": n_outputs}
        self.model.get_ref("tok2vec").set_dim("nO", hidden_width)
        self._build_scorer()

    def _build_scorer(self) -> None:
        """Give the scorer its dimensions from cfg and create its weights, if cfg has them."""
        scorer = self.model.get_ref("scorer")
        if not self.cfg.get("dims") or scorer.layers:
            return
        for name, value in self.cfg["dims"].items():
            scorer.set_dim(name, value)
        scorer.initialize()

    def from_bytes(self, bytes_data, *, exclude=tuple()):
        msg = srsly.msgpack_loads(bytes_data)
        if "cfg" in msg and "cfg" not in exclude:
            self.cfg.update(srsly.json_loads(msg["cfg"]))
            self._build_scorer()
        return super().from_bytes(bytes_data, exclude=exclude)

    def from_disk(self, path, *, exclude=tuple()):
        cfg_path = Path(path) / "cfg"
        if cfg_path.exists() and "cfg" not in exclude:
            self.cfg.update(srsly.read_json(cfg_path))
            self._build_scorer()
        return super().from_disk(path, exclude=exclude)


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
    uses_attention = component.model.get_ref("scorer").attrs["use_attention"]
    if uses_attention and not (config.output_attentions and config._attn_implementation == "eager"):
        raise MissingAttentionError(
            f"'{component.name}': the transformer '{upstream.name}' does not output attention weights "
            f"(output_attentions={config.output_attentions}, "
            f"attn_implementation={config._attn_implementation!r}).\n" + ATTENTION_CONFIG_HINT
        )
    return config.hidden_size, config.num_hidden_layers, config.num_attention_heads
