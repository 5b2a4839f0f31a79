"""Forked worker processes for `parse --n-process`: batches out in input order, serialised Docs back."""

import multiprocessing
import os
import sys
import time
from collections import deque
from multiprocessing.connection import wait
from typing import Deque, Iterable, Iterator, List, Tuple

from spacy.language import Language
from spacy.tokens import Doc
from spacy.util import minibatch

from ..runs.signals import become_worker, stop_signals_held
from .errors import ParseCommandError, flat_message
from .reading import READ_SIZE, SourceDoc, batch_where

# Batches sent ahead to each worker process: enough to keep it busy, few enough to bound memory.
BATCHES_AHEAD = 2


class Worker:
    """A forked process that parses the batches put in its queue and sends back serialised Docs.

    The pipeline is inherited through fork, not pickled. Batches go through a Queue (its feeder
    thread never blocks the caller); results come back through a one-way pipe.
    """

    def __init__(self, context, nlp: Language, batch_size: int):
        self.tasks = context.Queue()
        self.results, sender = context.Pipe(duplex=False)
        arguments = (nlp, self.tasks, sender, batch_size, os.getpid())
        self.process = context.Process(target=work, args=arguments, daemon=True)
        self.process.start()
        sender.close()  # so that a worker's death reads as the end of its pipe here

    def receive(self, batch: List[SourceDoc]) -> List[bytes]:
        """The serialised Docs of `batch`, the oldest batch sent to this worker."""
        try:
            wait([self.results, self.process.sentinel])
            if self.results.poll():
                kind, payload = self.results.recv()
                if kind == "docs":
                    return payload
                raise ParseCommandError(f"the pipeline failed on {batch_where(batch)}: {payload}")
        except (EOFError, OSError):
            pass
        self.process.join(1)
        code = self.process.exitcode
        how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        raise ParseCommandError(f"a worker process {how} while parsing {batch_where(batch)}")

    def stop(self, kill: bool) -> None:
        """Ask the worker to finish (kill=False: its queue is empty) or kill it, and free its queue and pipe."""
        if kill:
            self.process.kill()
        else:
            self.tasks.put(None)
        self.process.join(None if kill else 5)
        if self.process.is_alive():  # did not stop when asked: it would hold the exit
            kill = True
            self.process.kill()
            self.process.join()
        self.tasks.close()
        if not kill:
            self.tasks.join_thread()  # the worker read everything: the feeder thread ends
        else:
            # Batches the worker never read would block the queue's feeder thread for good (and, in
            # spaCy's nlp.pipe, the interpreter's exit): read them here so that the thread ends.
            thread, reader = getattr(self.tasks, "_thread", None), getattr(self.tasks, "_reader", None)
            deadline = time.monotonic() + 5
            try:
                while thread is not None and thread.is_alive() and time.monotonic() < deadline:
                    if reader.poll(0.01):
                        os.read(reader.fileno(), READ_SIZE)  # raw bytes: a killed worker may have read half a batch
            except (AttributeError, OSError, ValueError):
                pass  # the thread has sent everything and closed the reader
            if thread is not None:
                thread.join(1)
            self.tasks.cancel_join_thread()
        self.results.close()


def work(nlp: Language, tasks, results, batch_size: int, parent_pid: int) -> None:
    """A worker process's loop: a batch of SourceDocs in, ("docs", [bytes]) or ("error", text) out.

    Stop signals are the parent's to handle (it stops the workers); the worker dies with the parent."""
    become_worker(parent_pid)
    try:
        while True:
            batch = tasks.get()
            if batch is None:
                return
            try:
                docs = nlp.pipe((source.to_doc(nlp) for source in batch), batch_size=batch_size)
                message = ("docs", [doc.to_bytes(exclude=["tensor"]) for doc in docs])
            except Exception as error:
                message = ("error", f"{type(error).__name__}: {flat_message(error)}")
            results.send(message)
    except (OSError, EOFError):
        sys.exit(1)  # the parent closed its end: it is stopping
    finally:
        results.close()


def parse_in_processes(nlp: Language, sources: Iterable[SourceDoc], batch_size: int, n_process: int) -> Iterator[Doc]:
    """nlp.pipe's work over forked processes, in input order, stopping them on any error.

    Batch k goes to worker k % n_process; each worker has at most BATCHES_AHEAD batches waiting. A
    worker is forked when its first batch is sent, so a short input starts no more workers than it
    has batches. spaCy's own n_process is not used: after an error its queue feeder threads could block the
    process's exit forever. Here an error (or closing this generator) kills the workers and cancels
    what their queues still hold, so the caller can exit at once.
    """
    if "fork" not in multiprocessing.get_all_start_methods():
        raise ParseCommandError("--n-process above 1 forks the workers, which this platform cannot do")
    context = multiprocessing.get_context("fork")
    # Hugging Face tokenizers used in this process before the fork would warn in every worker.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    workers: List[Worker] = []
    in_flight: Deque[Tuple[Worker, List[SourceDoc]]] = deque()
    batches = enumerate(minibatch(sources, batch_size))
    stopped = False

    def send_next() -> None:
        for index, batch in batches:
            if index == len(workers) < n_process:
                with stop_signals_held():  # a worker started is a worker that the cleanup ends
                    workers.append(Worker(context, nlp, batch_size))
            worker = workers[index % n_process]
            with stop_signals_held():  # a stop inside Queue.put could keep its lock, which the cleanup takes
                worker.tasks.put(batch)
                in_flight.append((worker, batch))
            return

    try:
        for _ in range(BATCHES_AHEAD * n_process):
            send_next()
        while in_flight:
            worker, batch = in_flight.popleft()
            payload = worker.receive(batch)
            send_next()
            for data in payload:
                yield Doc(nlp.vocab).from_bytes(data)
        for worker in workers:
            worker.stop(kill=False)
        stopped = True
    finally:
        if not stopped:
            with stop_signals_held():
                for worker in workers:
                    worker.stop(kill=True)
