"""Load-time settings of spaCy's own pipes that keep them in `cfg`.

spaCy's tagger, senter and morphologizer keep `overwrite`, `extend`, `label_smoothing` and
`neg_prefix` in `pipe.cfg`, and their `from_disk`/`from_bytes` update `cfg` with the saved one. So
`spacy.load(path, config={"components": {"tagger": {"overwrite": True}}})` shows the override in
`nlp.config` while the tagger runs with the saved value. `spacy-pairatt.keep_config_settings.v1`, as
`[nlp] after_pipeline_creation`, makes loading keep the values the config created each pipe with;
labels and weights still come from the saved pipe.
"""

from functools import partial
from typing import Any, Callable, Dict

from spacy.language import Language
from spacy.util import registry

SETTINGS_KEPT_IN_CFG = ("overwrite", "extend", "label_smoothing", "neg_prefix")
KEEP_CONFIG_SETTINGS = {"@callbacks": "spacy-pairatt.keep_config_settings.v1"}


def load_keeping_settings(method: str, pipe: Any, settings: Dict[str, Any], *args, **kwargs) -> Any:
    """The pipe class's own `method` (`from_disk` or `from_bytes`), then the config's settings back
    into `cfg`. A module-level function under `partial`, so the pipeline still pickles."""
    loaded = getattr(type(pipe), method)(pipe, *args, **kwargs)
    pipe.cfg.update(settings)
    return loaded


def keep_config_settings(nlp: Language) -> Language:
    """Each pipe that keeps one of SETTINGS_KEPT_IN_CFG loads its weights and labels but keeps the
    settings it was created with."""
    for _, pipe in nlp.pipeline:
        cfg = getattr(pipe, "cfg", None)
        settings = {key: cfg[key] for key in SETTINGS_KEPT_IN_CFG if isinstance(cfg, dict) and key in cfg}
        if settings:
            for method in ("from_disk", "from_bytes"):
                setattr(pipe, method, partial(load_keeping_settings, method, pipe, settings))
    return nlp


@registry.callbacks("spacy-pairatt.keep_config_settings.v1")
def make_keep_config_settings() -> Callable[[Language], Language]:
    """Registered as `spacy-pairatt.keep_config_settings.v1`, for `[nlp] after_pipeline_creation`."""
    return keep_config_settings
