import os
import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))


def pytest_configure(config):
    """Under pytest-xdist (``make test``: a worker per core) each worker runs torch on one thread.

    torch starts one intra-op thread per core in every process: N workers on N cores would
    run N² threads that wait on one another. One thread, not cores // workers: with torch
    2.13 any ``torch.set_num_threads(k)`` with k > 1 (even k = the default) makes every later
    op pay ~10 ms (measured on this 2-core machine: torch.exp on 300 numbers 0.002 ms before,
    11.5 ms after ``set_num_threads(2)``, 0.002 ms after ``set_num_threads(1)``). A fit's
    scores do not depend on the thread count beyond float rounding (the invariance tests
    rerun under another setting, see the Makefile).
    """
    if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
        import torch

        torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tok_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tokenizers")


@pytest.fixture
def one_torch_thread():
    """Training tests on 1 thread: faster than 2 on a shared 2-core machine, and stable."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
