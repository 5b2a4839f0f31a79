"""Old names that keep working for one release, each with a DeprecationWarning naming the new one."""

import warnings
from typing import Optional, TypeVar

T = TypeVar("T")


def warn_renamed(old: str, new: str) -> None:
    """Warn that `old` (a registered name or a config key) is now `new`."""
    warnings.warn(f"{old} is deprecated and will be removed in the next release: use {new}", DeprecationWarning, 3)


def renamed_argument(new_value: Optional[T], old_value: Optional[T], old: str, new: str) -> Optional[T]:
    """The value of a renamed config argument: `old_value` (with a DeprecationWarning) when given, else `new_value`.

    A config that names the old section also gets the factory's default for the new one merged in,
    so the old section wins when both are there.
    """
    if old_value is not None:
        warn_renamed(old, new)
        return old_value
    return new_value
