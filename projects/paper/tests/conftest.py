"""The checkout's fixtures (tests/conftest.py) for the paper project's tests too: pytest finds a conftest's
fixtures only under its own folder, so they are named here; the helpers are imported from tests.conftest."""

from tests.conftest import (  # noqa: F401
    pipeline_device,
    stop_signals_as_default,
    tiny_bert_dir,
    tiny_mpnet_dir,
    ud_train_docs,
)
