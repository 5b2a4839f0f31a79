"""What `pairatt_parser` and `pairatt_rel` share: a pair scorer whose size is known only after
`initialize` (or from the saved cfg), fed by a listener to an upstream transformer with attention."""

import weakref
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, Optional, Tuple

import srsly
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from thinc.api import Config

from ..core.features import MissingAttentionError
from ..core.validation import ATTENTION_CONFIG_HINT
from .forking import single_threaded_torch_after_fork
from .memory import HEAP_RELEASE


def default_model(architecture: str, scorer: str) -> Config:
    """A component's default [model]: `architecture` reading the shared transformer through the
    listener, with `scorer` (the lines of its [model.scorer] section)."""
    return Config().from_str(
        f"""
[model]
@architectures = "{architecture}"
grad_factor = 1.0

[model.tok2vec]
@architectures = "spacy-pairatt.TransformerListener.v1"
upstream = "*"

[model.scorer]
{scorer}
"""
    )["model"]


def prepare_process() -> None:
    """What a process running these components needs: fork-safe torch (n_process).

    malloc's thresholds are left as they are (only training bounds the heap); the components hand
    free heap back as they parse instead (`memory.HEAP_RELEASE`).
    """
    single_threaded_torch_after_fork()


# The pipeline each component was made for by its factory, to keep that pipeline's config in step
# when a setting changes after construction (a tuned threshold). Weak, so neither keeps the other.
_PIPELINES: "weakref.WeakKeyDictionary[TrainablePipe, weakref.ref]" = weakref.WeakKeyDictionary()


class PairScoringPipe(TrainablePipe):
    """A TrainablePipe whose model has refs "tok2vec" (a TransformerListener) and "scorer".

    cfg holds learned values (labels, dims), which loading takes from the saved cfg, and the
    factory's settings named in CONFIG_SETTINGS, which come from the config the pipeline is built
    or loaded with: `spacy.load(path, config=...)` runs with the values `nlp.config` reports.
    """

    CONFIG_SETTINGS: Tuple[str, ...] = ()

    def __call__(self, doc: Doc) -> Doc:
        doc = super().__call__(doc)
        HEAP_RELEASE.parsed(len(doc))
        return doc

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        """TrainablePipe.pipe, counting the parsed words for the process's heap release (`memory.py`)."""
        for doc in super().pipe(stream, batch_size=batch_size):
            HEAP_RELEASE.parsed(len(doc))
            yield doc

    @property
    def labels(self) -> Tuple[str, ...]:
        return tuple(self.cfg["labels"])

    def add_label(self, label: str) -> int:
        """Add a label before initialization; the model cannot grow its label set afterwards."""
        if label in self.cfg["labels"]:
            return 0
        self._allow_extra_label()
        self.cfg["labels"].append(label)
        return 1

    def _remember_pipeline(self, nlp: Language) -> None:
        """Called by the factory: `set_setting` updates this pipeline's config too."""
        _PIPELINES[self] = weakref.ref(nlp)

    def set_setting(self, key: str, value: Any) -> None:
        """Change a setting after construction, in cfg and in the config of the pipeline holding
        this component, so `nlp.config` and a saved pipeline's config.cfg keep what runs."""
        self.cfg[key] = value
        nlp = _PIPELINES[self]() if self in _PIPELINES else None
        if nlp is not None and self.name in nlp.component_names and nlp.get_pipe(self.name) is self:
            nlp.get_pipe_config(self.name)[key] = value

    def _load_cfg(self, saved: Dict) -> None:
        """Take the saved cfg except the settings, which stay as the config set them; build the scorer."""
        self.cfg.update({key: value for key, value in saved.items() if key not in self.CONFIG_SETTINGS})
        self._build_scorer()

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
            self._load_cfg(srsly.json_loads(msg["cfg"]))
        return super().from_bytes(bytes_data, exclude=(*exclude, "cfg"))

    def from_disk(self, path, *, exclude=tuple()):
        cfg_path = Path(path) / "cfg"
        if cfg_path.exists() and "cfg" not in exclude:
            self._load_cfg(srsly.read_json(cfg_path))
        return super().from_disk(path, exclude=(*exclude, "cfg"))


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
