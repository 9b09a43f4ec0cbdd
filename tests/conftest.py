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
    """Under pytest-xdist (``make test``: a worker per core) each worker takes its share of the cores.

    torch starts one intra-op thread per core in every process: N workers on N cores would
    run N² threads that wait on one another (measured: after a Ray run in the same process,
    torch.exp on 300 numbers took 2-11 ms with 2 threads, 0.003 ms with 1, and the report
    tests' 5,000-text fixture 33 s of CPU instead of 7). A fit's scores do not depend on the thread count
    beyond float rounding (the invariance tests rerun on one thread, see the Makefile).
    """
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        import torch

        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(workers)))


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
