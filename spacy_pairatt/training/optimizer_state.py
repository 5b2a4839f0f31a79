"""A Thinc optimizer's state, saved and restored across processes.

The optimizer keeps its Adam moments (mom1, mom2), parameter averages and update counts under
`(id, name)` keys, where `id` numbers a Thinc node or shim in this process only: the same pipeline
built again numbers them differently. Saved, each key becomes the parameter's place in the pipeline,
`[pipe, node, shim, name]`: the pipe's name, the node's index in the pipe model's `walk()`, the
shim's index in that node's `shims` (-1: the node's own parameter) and the parameter's name (a torch
parameter's, for a shim). A model shared by several pipes is placed in the first. The scheduled
values (learning rate, betas, ...) are saved as they stand; their schedules' positions come back by
stepping them (`resumable.py`).
"""

from typing import Dict, List, Tuple, Union

from thinc.api import Optimizer, get_current_ops
from thinc.backends import get_array_ops

from .checkpoints import ResumeError

KeyT = Tuple[int, str]
Place = Tuple[str, int, int, str]
KEYED_ARRAYS = ("mom1", "mom2", "averages")
KEYED_COUNTS = ("nr_update", "last_seen")
SCHEDULED_VALUES = ("learn_rate", "b1", "b2", "eps", "L2", "grad_clip")


def pipe_models(nlp):
    """(pipe name, Thinc model) of every component that has one, frozen and disabled ones too."""
    return [(name, pipe.model) for name, pipe in nlp.components if hasattr(getattr(pipe, "model", None), "walk")]


def parameter_places(nlp, keys) -> Dict[KeyT, Place]:
    """Each optimizer key → its place; a key of no model in the pipeline is an error (its state would be lost)."""
    node_places: Dict[int, Tuple[str, int, set]] = {}
    shim_places: Dict[int, Tuple[str, int, int]] = {}
    for pipe_name, model in pipe_models(nlp):
        for index, node in enumerate(model.walk()):
            node_places.setdefault(node.id, (pipe_name, index, set(node.param_names)))
            for shim_index, shim in enumerate(node.shims):
                shim_places.setdefault(shim.id, (pipe_name, index, shim_index))
    places = {}
    for model_id, name in keys:
        if name in node_places.get(model_id, ("", 0, ()))[2]:
            places[(model_id, name)] = (*node_places[model_id][:2], -1, name)
        elif model_id in shim_places:
            places[(model_id, name)] = (*shim_places[model_id], name)
        else:
            raise ResumeError(f"optimizer parameter {(model_id, name)}: in no pipe's model, its state cannot be saved")
    return places


def current_key(models: Dict[str, List], place: Place) -> KeyT:
    """This process's optimizer key of a saved place; a place the pipeline lacks is an error."""
    pipe_name, index, shim_index, name = place
    nodes = models.get(pipe_name, [])
    if index >= len(nodes) or shim_index >= len(nodes[index].shims):
        raise ResumeError(f"checkpoint parameter {pipe_name}/{index}/{shim_index}/{name}: not in this pipeline")
    node = nodes[index]
    return (node.id if shim_index < 0 else node.shims[shim_index].id, name)


def optimizer_state(optimizer: Optimizer, nlp) -> dict:
    """Everything the optimizer has learnt, keyed by place, arrays as NumPy."""
    keyed = [getattr(optimizer, kind) or {} for kind in (*KEYED_ARRAYS, *KEYED_COUNTS)]
    keys = sorted({key for values in keyed for key in values}, key=lambda key: (key[0], key[1]))
    places = parameter_places(nlp, keys)
    state: Dict[str, Union[list, dict]] = {"places": [list(places[key]) for key in keys]}
    for kind in KEYED_ARRAYS:
        values = getattr(optimizer, kind) or {}
        state[kind] = [to_numpy(values[key]) if key in values else None for key in keys]
    for kind in KEYED_COUNTS:
        state[kind] = [int(getattr(optimizer, kind)[key]) if key in getattr(optimizer, kind) else None for key in keys]
    state["values"] = {name: getattr(optimizer, name) for name in SCHEDULED_VALUES}
    state["use_averages"] = optimizer.averages is not None
    state["radam_buffer"] = [[to_plain(value) for value in entry] for entry in optimizer._radam_buffer]
    return state


def restore_optimizer(optimizer: Optimizer, nlp, state: dict) -> None:
    """Put a saved state (`optimizer_state`) into a fresh optimizer of the same config over the same pipeline."""
    if state["use_averages"] != (optimizer.averages is not None):
        raise ResumeError("the checkpoint's optimizer and the config's differ in use_averages")
    models = {pipe_name: list(model.walk()) for pipe_name, model in pipe_models(nlp)}
    keys = [current_key(models, tuple(place)) for place in state["places"]]
    ops = get_current_ops()
    for kind in KEYED_ARRAYS:
        if getattr(optimizer, kind) is not None:
            saved = [(key, array) for key, array in zip(keys, state[kind]) if array is not None]
            getattr(optimizer, kind).update({key: ops.asarray(array.copy()) for key, array in saved})
    for kind in KEYED_COUNTS:
        getattr(optimizer, kind).update({key: count for key, count in zip(keys, state[kind]) if count is not None})
    for name, value in state["values"].items():
        setattr(optimizer, name, value)
    optimizer._radam_buffer = [list(entry) for entry in state["radam_buffer"]]


def to_numpy(array):
    return get_array_ops(array).to_numpy(array)


def to_plain(value):
    """A RAdam buffer entry (None, an int or a float, NumPy's or Python's) as a plain Python value."""
    return value.item() if hasattr(value, "item") else value
