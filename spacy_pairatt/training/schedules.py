"""Learning-rate schedules that pickle.

A pipeline initialised in Python holds its optimizer (`nlp._optimizer`), and thinc's
`warmup_linear.v1` is a generator, which stops the whole pipeline from pickling (a UD pipeline built
from its config and initialised could not be sent to a worker process). `WarmupLinear` gives the same
rates as an iterator object.
"""

from dataclasses import dataclass

from thinc.api import registry


@dataclass
class WarmupLinear:
    """thinc's `warmup_linear.v1`, step by step: a linear warmup from 0 to `initial_rate` over
    `warmup_steps`, then a linear decline to 0 at `total_steps`."""

    initial_rate: float
    warmup_steps: int
    total_steps: int
    step: int = 0

    def __iter__(self) -> "WarmupLinear":
        return self

    def __next__(self) -> float:
        if self.step < self.warmup_steps:
            factor = self.step / max(1, self.warmup_steps)
        else:
            factor = max(0.0, (self.total_steps - self.step) / max(1.0, self.total_steps - self.warmup_steps))
        self.step += 1
        return factor * self.initial_rate


@registry.schedules("spacy-pairatt.warmup_linear.v1")
def make_warmup_linear(initial_rate: float, warmup_steps: int, total_steps: int) -> WarmupLinear:
    """Registered as `spacy-pairatt.warmup_linear.v1`: `warmup_linear.v1` that pickles."""
    return WarmupLinear(initial_rate, warmup_steps, total_steps)
