"""Settings and learned state: the config holds a pipe's settings, `cfg` its learned state.

A setting (a threshold, `overwrite`, `spans_key`) is what the config says: the factory puts it in
`pipe.cfg`, loading keeps the config's value over the saved cfg's, so
`spacy.load(path, config=override)` runs what `nlp.config` shows. A tuning step changes one with
`set_setting`, as spaCy's `find_threshold` does (the component's block of `nlp.config` and
`pipe.cfg` together), and saves the pipeline. Learned state (labels, sizes, the parser's fitted
temperatures) lives in `cfg` only and comes from the saved pipe.

spaCy's tagger, senter and morphologizer keep `overwrite`, `extend`, `label_smoothing` and
`neg_prefix` in `pipe.cfg`, and their `from_disk`/`from_bytes` put the saved cfg back over them.
`spacy-pairatt.keep_config_settings.v1`, as `[nlp] after_pipeline_creation`, makes their loading
keep the values the config created each pipe with.
"""

from functools import partial
from typing import Any, Callable, Iterable

from spacy.language import Language
from spacy.util import registry

from .validation import SETTING_RULES, check_settings

SETTINGS_KEPT_IN_CFG = ("overwrite", "extend", "label_smoothing", "neg_prefix")
KEEP_CONFIG_SETTINGS = {"@callbacks": "spacy-pairatt.keep_config_settings.v1"}


def load_keeping(pipe: Any, keys: Iterable[str], load: Callable[[], Any]) -> Any:
    """Run `load` (the pipe's own `from_disk` or `from_bytes`), then put the values `keys` had in
    `pipe.cfg` before it back: the config's, not the saved cfg's."""
    settings = {key: pipe.cfg[key] for key in keys if key in pipe.cfg}
    loaded = load()
    pipe.cfg.update(settings)
    return loaded


def set_setting(nlp: Language, name: str, key: str, value: Any) -> None:
    """Set the setting `key` of the pipe `name` to `value` in the pipe's block of `nlp.config` and in
    its `cfg`, as a tuning step leaves it (spaCy's `find_threshold` does the same): `nlp.to_disk`
    then saves it in config.cfg, and the pipe runs with it now and after loading."""
    pipe = nlp.get_pipe(name)
    settings = getattr(pipe, "CONFIG_SETTINGS", ())
    if key not in settings:
        raise KeyError(f"{name}: {key!r} is not one of its settings {settings}")
    if key in SETTING_RULES:
        check_settings(name, **{key: value})
    nlp.get_pipe_config(name)[key] = value
    pipe.cfg[key] = value


class ConfigSetting:
    """A pipe's attribute for one of its CONFIG_SETTINGS, read from `cfg`. Assigning to it is
    refused: the config would not know (`set_setting` changes both)."""

    def __set_name__(self, owner: type, key: str) -> None:
        self.key = key

    def __get__(self, pipe: Any, owner: type = None) -> Any:
        return self if pipe is None else pipe.cfg[self.key]

    def __set__(self, pipe: Any, value: Any) -> None:
        raise AttributeError(
            f"{pipe.name}: {self.key} is a config setting; set it with "
            f"spacy_pairatt.set_setting(nlp, {pipe.name!r}, {self.key!r}, {value!r}), which changes nlp.config too"
        )


def load_keeping_settings(method: str, pipe: Any, keys: Iterable[str], *args, **kwargs) -> Any:
    """The pipe class's own `method` (`from_disk` or `from_bytes`), keeping `keys` (`load_keeping`).
    A module-level function under `partial`, so the pipeline still pickles."""
    return load_keeping(pipe, keys, partial(getattr(type(pipe), method), pipe, *args, **kwargs))


def keep_config_settings(nlp: Language) -> Language:
    """Each pipe that keeps one of SETTINGS_KEPT_IN_CFG loads its weights and labels but keeps the
    settings it was created with."""
    for _, pipe in nlp.pipeline:
        cfg = getattr(pipe, "cfg", None)
        keys = tuple(key for key in SETTINGS_KEPT_IN_CFG if isinstance(cfg, dict) and key in cfg)
        if keys:
            for method in ("from_disk", "from_bytes"):
                setattr(pipe, method, partial(load_keeping_settings, method, pipe, keys))
    return nlp


@registry.callbacks("spacy-pairatt.keep_config_settings.v1")
def make_keep_config_settings() -> Callable[[Language], Language]:
    """Registered as `spacy-pairatt.keep_config_settings.v1`, for `[nlp] after_pipeline_creation`."""
    return keep_config_settings
