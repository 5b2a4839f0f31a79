"""The process's random states (Python's, NumPy's, torch's CPU and CUDA generators), saved and restored.

CuPy's generator cannot be read back, so a training on a GPU reseeds it before every step from the
seed and the step (`reseed_gpu_generator`): its state is then a function of the step alone.
"""

import random
import sys

import numpy


def random_states() -> dict:
    """The states as plain values and NumPy arrays (for msgpack)."""
    version, internal, gauss_next = random.getstate()
    kind, keys, position, has_gauss, cached_gaussian = numpy.random.get_state(legacy=True)
    states = {
        "python": [version, list(internal), gauss_next],
        "numpy": [kind, keys, int(position), int(has_gauss), float(cached_gaussian)],
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        states["torch"] = torch.get_rng_state().numpy()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            states["torch_cuda"] = [state.numpy() for state in torch.cuda.get_rng_state_all()]
    return states


def restore_random_states(states: dict) -> None:
    version, internal, gauss_next = states["python"]
    random.setstate((version, tuple(internal), gauss_next))
    kind, keys, position, has_gauss, cached_gaussian = states["numpy"]
    numpy.random.set_state((kind, numpy.array(keys, dtype=numpy.uint32), position, has_gauss, cached_gaussian))
    if "torch" in states:
        import torch

        torch.set_rng_state(torch.from_numpy(states["torch"].copy()))
        if "torch_cuda" in states and torch.cuda.is_available():
            torch.cuda.set_rng_state_all([torch.from_numpy(state.copy()) for state in states["torch_cuda"]])


def reseed_gpu_generator(seed: int, step: int) -> None:
    """CuPy's global generator seeded from (seed, step) when Thinc runs on CuPy; nothing otherwise."""
    from thinc.api import CupyOps, get_current_ops

    if isinstance(get_current_ops(), CupyOps):
        import cupy

        cupy.random.seed((seed * 1_000_003 + step) % 2**32)
