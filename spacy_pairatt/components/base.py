"""The base pipe of `pairatt_parser` and `pairatt_rel`: a pair scorer whose size is known only after
`initialize` (or from the saved cfg), fed by a listener to an upstream transformer with attention."""

from pathlib import Path
from typing import Dict, Optional, Tuple

import srsly
from spacy.language import Language
from spacy.pipeline import TrainablePipe

from .pipe_setup import upstream_transformer_dims


class PairScoringPipe(TrainablePipe):
    """A TrainablePipe whose model has refs "tok2vec" (a TransformerDataListener) and "pair_scorer".

    cfg holds learned values (labels, dims), which loading takes from the saved cfg, and the
    factory's settings named in CONFIG_SETTINGS, which come from the config the pipeline is built
    or loaded with: `spacy.load(path, config=...)` runs with the values `nlp.config` reports, and a
    tuning step changes one with `set_setting` (`integration.load_settings`).
    """

    CONFIG_SETTINGS: Tuple[str, ...] = ()

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
        """Give the pair scorer its dimensions from cfg and create its weights, if cfg has them."""
        scorer = self.model.get_ref("pair_scorer")
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
