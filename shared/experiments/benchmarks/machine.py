"""One line that says where a benchmark ran: cores, CPU, torch build, threads and load.

Printed by the benchmarks whose tables sit in the docs, so that each table states its machine.

Example:
    >>> machine_line()  # doctest: +SKIP
    '2-core x86_64 Intel(R) Xeon(R) Processor, torch 2.13.0+cpu, 1 torch thread, load average 1.02'
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

__all__ = ["cpu_name", "machine_line"]


def cpu_name() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what ``platform`` knows.

    Example:
        >>> isinstance(cpu_name(), str)
        True
    """
    info = Path("/proc/cpuinfo")
    if info.exists():
        for line in info.read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def machine_line() -> str:
    """Cores, architecture, CPU, torch version, torch threads and the 1-minute load average now.

    Example:
        >>> machine_line().split(",")[1].strip().startswith("torch")
        True
    """
    import torch

    threads = torch.get_num_threads()
    load = f"load average {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "load average unknown"
    return (
        f"{os.cpu_count()}-core {platform.machine()} {cpu_name()}, torch {torch.__version__}, "
        f"{threads} torch thread{'s' if threads != 1 else ''}, {load}"
    )
