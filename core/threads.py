"""One BLAS thread per bench process.

The bench's numerical work is many small products (the reference model's decode steps, the
emulated NPU's tiles), where a second BLAS thread gains nothing. On a shared lab host it costs a
great deal: OpenBLAS threads spin while they wait, so a host running several bays, a line fixture
and a nightly at once (or a few test workers on two cores) spends its CPU on spinning. Measured on a
loaded 2-core host: one 1 x 16384 by 16384 x 64 product took 3.7 ms on one thread and 106 ms on two.

A lab that wants more threads sets OPENBLAS_NUM_THREADS (or MKL_NUM_THREADS) itself; that choice
stands.
"""
from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

_CHOICES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread() -> None:
    """Limit BLAS to one thread here and in every process this one starts, unless the environment
    already says how many."""
    if any(name in os.environ for name in _CHOICES):
        return
    for name in _CHOICES:
        os.environ[name] = "1"  # bays, emulated stations and benches this process starts
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")  # a BLAS this process has already loaded
    log.debug("BLAS limited to one thread")
