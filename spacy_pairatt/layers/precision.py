"""The transformer's arithmetic precision: float32, or bfloat16 where the processor computes it natively.

A transformer forward and backward pass spends most of its time in matrix products. Under
`torch.autocast(..., dtype=torch.bfloat16)` those run in bfloat16 while the parameters, the
optimizer's state and the numerically touchy ops (layer norm) stay float32: on a CPU with native
bfloat16 (AVX512-BF16 or AMX) the encoder's own work takes well under float32's time (what whole
parses and training steps gain: docs/performance.md#precision). thinc's `PyTorchShim` autocasts
only on CUDA, and only to float16 (spacy-transformers' `mixed_precision`), so `PrecisionHFShim`
adds the context itself, around the encoder's own calls:
nothing process-wide is switched, and whatever leaves the shim is float32, since numpy, thinc and
the parser have no bfloat16.

In prediction, autocast would cast every linear layer's weights to bfloat16 again on each call: a
pass over all of them per batch (about 85M numbers for a base-size encoder, on every one of an MPNet
parse's forward calls). `BfloatWeights` keeps those copies between calls instead, rebuilt when a weight
changes; training steps cast as autocast does, since their gradients must reach the float32 weights.

A CPU without native bfloat16 emulates it, at a fraction of float32's speed, so "auto" asks the
processor (`torch.cpu.get_capabilities()`, which reads CPUID) rather than torch's "bfloat16
runs here" (`torch.ops.mkldnn._is_mkldnn_bf16_supported()`, true on emulating CPUs as well).
"""

import contextlib
import copy
import functools
import warnings
from typing import Any, ContextManager, Dict, Optional, Tuple

import torch
from spacy_transformers.layers.hf_shim import HFShim
from thinc.api import ArgsKwargs
from torch import nn

PRECISIONS = ("float32", "bfloat16", "auto")
# Transformer architectures without a precision -> the version with it (same arguments otherwise).
IN_PRECISION_ARCHITECTURES = {
    "spacy-transformers.TransformerModel.v3": "spacy-pairatt.TransformerModel.v1",
    "spacy-pairatt.TransformerModel.v1": "spacy-pairatt.TransformerModel.v1",
    "spacy-pairatt.AttentionTransformerModel.v1": "spacy-pairatt.AttentionTransformerModel.v2",
    "spacy-pairatt.AttentionTransformerModel.v2": "spacy-pairatt.AttentionTransformerModel.v2",
}
# The x86 instructions that compute bfloat16 products natively (torch.cpu.get_capabilities keys).
NATIVE_BFLOAT16_CPU_FEATURES = ("avx512_bf16", "amx_bf16")


@functools.lru_cache(maxsize=1)
def cpu_has_native_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AVX512-BF16 or AMX), not by emulation."""
    capabilities = torch.cpu.get_capabilities()
    return any(capabilities.get(feature, False) for feature in NATIVE_BFLOAT16_CPU_FEATURES)


def check_precision(precision: str) -> str:
    """`precision` if it is one of PRECISIONS, else a one-line ValueError naming the choices."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} is not one of {', '.join(map(repr, PRECISIONS))}")
    return precision


def autocast_dtype(precision: str, device_type: str) -> Optional[torch.dtype]:
    """The dtype to autocast the encoder to on `device_type` ("cpu", "cuda", ...), None for float32.

    "auto" is bfloat16 on a CPU with native bfloat16 and on a CUDA device that supports it;
    "bfloat16" is bfloat16 wherever asked, with a warning (once) on a CPU that only emulates it.
    """
    check_precision(precision)
    if precision == "float32":
        return None
    if device_type == "cpu":
        if cpu_has_native_bfloat16():
            return torch.bfloat16
        if precision == "bfloat16":
            warn_emulated_bfloat16()
            return torch.bfloat16
        return None
    if device_type == "cuda" and (precision == "bfloat16" or torch.cuda.is_bf16_supported()):
        return torch.bfloat16
    return None


@functools.lru_cache(maxsize=1)
def warn_emulated_bfloat16() -> None:
    """Warn once per process: bfloat16 was asked for on a CPU that emulates it."""
    warnings.warn(
        'precision = "bfloat16" on a CPU without native bfloat16 (no AVX512-BF16 or AMX): it runs, '
        'emulated, slower than float32; "auto" would use float32 here',
        stacklevel=3,
    )


def precision_context(precision: str, device: torch.device) -> ContextManager:
    """An autocast context for the encoder's calls on `device`, or a no-op one for float32."""
    dtype = autocast_dtype(precision, device.type)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def as_float32(value):
    """`value` with every floating tensor in it (a Hugging Face ModelOutput, tuple, list) as float32.

    The cast is part of the autograd graph, so float32 gradients flow back into bfloat16 ops.
    """
    if isinstance(value, torch.Tensor):
        return value.float() if value.is_floating_point() and value.dtype != torch.float32 else value
    if isinstance(value, dict):  # ModelOutput is an OrderedDict: set items in place, keep its class
        for key in list(value.keys()):
            value[key] = as_float32(value[key])
        return value
    if isinstance(value, (tuple, list)):
        return type(value)(as_float32(item) for item in value)
    return value


def linear_parameters(model: nn.Module) -> Dict[str, torch.Tensor]:
    """The weights and biases of every `nn.Linear` in `model`, by their names in its state dict:
    what autocast casts to bfloat16 on every call (embeddings and layer norms it leaves alone)."""
    return {
        f"{module_name}.{name}" if module_name else name: parameter
        for module_name, module in model.named_modules()
        if isinstance(module, nn.Linear)
        for name, parameter in module.named_parameters(recurse=False)
    }


class BfloatWeights:
    """Lower-precision copies of a model's linear weights, kept from one prediction to the next.

    The copies are the ones autocast makes (the same rounding), so outputs do not change. They are
    remade when a weight's storage or version changes (a load, `use_params`, an in-place edit by
    torch); `clear` is for changes torch cannot see, such as thinc's optimizer writing through numpy.
    """

    def __init__(self):
        self._key: Optional[Tuple] = None
        self._copies: Dict[str, torch.Tensor] = {}

    def get(self, model: nn.Module, dtype: torch.dtype) -> Dict[str, torch.Tensor]:
        """`model`'s linear weights in `dtype`, by state-dict name (for `torch.func.functional_call`)."""
        parameters = linear_parameters(model)
        key = (dtype, tuple((name, p.data_ptr(), p._version) for name, p in parameters.items()))
        if key != self._key:
            self._copies = {}  # the old copies go before the new ones are made
            self._copies = {name: p.detach().to(dtype) for name, p in parameters.items()}
            self._key = key
        return self._copies

    def clear(self) -> None:
        self._key, self._copies = None, {}


class PrecisionHFShim(HFShim):
    """spacy-transformers' HFShim whose forward passes run under the precision's autocast and
    return float32; backprop, weights and serialization are the stock shim's. In prediction the
    linear weights' bfloat16 copies are kept between calls (`BfloatWeights`)."""

    def __init__(self, *args, precision: str = "float32", **kwargs):
        super().__init__(*args, **kwargs)
        self.precision = check_precision(precision)
        self.bfloat_weights = BfloatWeights()

    def predict(self, inputs: ArgsKwargs):
        dtype = autocast_dtype(self.precision, self.device.type)
        if dtype is None or self._mixed_precision:  # float32, or float16 from spacy-transformers on CUDA
            with precision_context(self.precision, self.device):
                return as_float32(super().predict(inputs))
        weights = self.bfloat_weights.get(self._model, dtype)
        self._model.eval()
        try:
            with torch.no_grad(), torch.autocast(self.device.type, dtype=dtype):
                output = torch.func.functional_call(self._model, weights, inputs.args, inputs.kwargs)
        finally:
            self._model.train()
        return as_float32(output)

    def begin_update(self, inputs: ArgsKwargs):
        self.bfloat_weights.clear()  # the weights are about to train: no copy is kept meanwhile
        with precision_context(self.precision, self.device):
            output, backprop = super().begin_update(inputs)
            return as_float32(output), backprop

    def finish_update(self, optimizer):
        self.bfloat_weights.clear()
        super().finish_update(optimizer)

    def from_bytes(self, bytes_data):
        self.bfloat_weights.clear()
        return super().from_bytes(bytes_data)


def precision_overrides(config: Dict[str, Any], precision: str) -> Dict[str, Any]:
    """The `spacy.load(path, config=...)` override that runs every transformer of a pipeline's
    config in `precision`, including one saved before the setting existed (TransformerModel.v3):
    its model block, whole, under the architecture version that takes a precision. Same weights."""
    check_precision(precision)
    overrides = {}
    for name, component in config["components"].items():
        model = component.get("model", {})
        architecture = IN_PRECISION_ARCHITECTURES.get(model.get("@architectures"))
        if architecture:
            block = {**copy.deepcopy(dict(model)), "@architectures": architecture, "precision": precision}
            overrides[name] = {"model": block}
    if not overrides:
        raise ValueError("the pipeline has no transformer whose precision can be set")
    return {"components": overrides}
