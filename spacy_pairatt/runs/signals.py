"""The signal policy of every `python -m spacy_pairatt` command, in one place.

SIGINT (Ctrl-C), SIGTERM (`kill`, a job scheduler) and SIGHUP (a closed terminal or ssh session)
are one thing: a request to stop. Each raises `Interrupted` (a KeyboardInterrupt) where the command
is, so the same cleanup runs whichever came: scratch files removed, worker processes ended, a model
folder either the old one or the new one. The steps that must not be cut in two (a pair of renames,
removing scratch, ending the workers) hold stop signals: one that comes meanwhile raises when the
step is done. A second signal stops a cleanup that takes too long between such steps; SIGKILL
stops anything, and the next run removes what it left (`spacy_pairatt.runs.scratch`).

Worker processes ignore stop signals (their parent ends them) and die with their parent, so a
parent killed outright leaves none running.
"""

import ctypes
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator, Optional

STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
PR_SET_PDEATHSIG = 1  # linux/prctl.h
PARENT_WATCH_SECONDS = 1.0


class Interrupted(KeyboardInterrupt):
    """A stop signal, raised where the command is; str() names the signal."""


class HeldSignals:
    """How deep the main thread is in held steps, and the stop signal that came meanwhile."""

    depth = 0
    pending: Optional[int] = None


def in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def interrupt(signum: int, frame) -> None:
    """The handler of stop signals: raise Interrupted, or keep the signal for the end of a held step.

    Holding is done here, not with a signal mask: the mask is per thread, and a signal taken by
    another thread (a queue's feeder) would run this handler wherever the main thread is next, say in
    an at-fork hook, where Python drops the exception."""
    if HeldSignals.depth:
        HeldSignals.pending = HeldSignals.pending or signum
        return
    raise Interrupted(signal.Signals(signum).name)


@contextmanager
def stop_signals_interrupt() -> Iterator[None]:
    """While the block runs, each stop signal raises Interrupted (see `interrupt`).

    A signal the command was started ignoring stays ignored (`nohup` ignores SIGHUP, a shell's `&`
    SIGINT). Outside the main thread (where Python cannot install handlers) the block runs unchanged."""
    if not in_main_thread():
        yield
        return
    handled = [stop for stop in STOP_SIGNALS if signal.getsignal(stop) is not signal.SIG_IGN]
    previous = {stop: signal.signal(stop, interrupt) for stop in handled}
    try:
        yield
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)


@contextmanager
def stop_signals_held() -> Iterator[None]:
    """A step that must not be cut in two: a stop signal that comes meanwhile raises Interrupted when
    the step is done (unless it ends in an error of its own, which then stops the command)."""
    HeldSignals.depth += 1
    try:
        yield
    except BaseException:
        release_held(raising=False)
        raise
    release_held(raising=True)


def release_held(raising: bool) -> None:
    """Leave a held step; at the outermost one, raise the stop signal kept meanwhile, if `raising`."""
    HeldSignals.depth -= 1
    if HeldSignals.depth or HeldSignals.pending is None:
        return
    signum, HeldSignals.pending = HeldSignals.pending, None
    if raising:
        raise Interrupted(signal.Signals(signum).name)


@contextmanager
def stop_signals_ignored(signals=STOP_SIGNALS) -> Iterator[None]:
    """Ignore `signals` while child processes are started: they inherit it (Python keeps an ignored
    SIGINT), so a Ctrl-C, which the terminal sends to the whole process group, reaches only this
    process, whose cleanup stops them."""
    if not in_main_thread():
        yield
        return
    previous = {stop: signal.signal(stop, signal.SIG_IGN) for stop in signals}
    try:
        yield
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)


def become_worker(parent_pid: int) -> None:
    """In a forked worker process: ignore stop signals (the parent ends its workers) and die with
    the parent: Linux's parent-death signal, elsewhere a thread that watches the parent."""
    for stop in STOP_SIGNALS:
        signal.signal(stop, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)
        return
    threading.Thread(target=watch_parent, args=(parent_pid,), daemon=True, name="parent-watch").start()


def watch_parent(parent_pid: int) -> None:
    """End this process once it is no longer the child of `parent_pid` (the parent died)."""
    while os.getppid() == parent_pid:
        time.sleep(PARENT_WATCH_SECONDS)
    os._exit(1)
