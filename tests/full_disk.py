"""A disk that fills: RLIMIT_FSIZE makes a write past `size` bytes of a file fail as a full disk's
does (EFBIG, "File too large", and like ENOSPC no file name), for the tests of what an error names."""

import resource
import signal
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def disk_full_after(size: int) -> Iterator[None]:
    previous = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails instead of killing the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, previous[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, previous)
        signal.signal(signal.SIGXFSZ, handler)
