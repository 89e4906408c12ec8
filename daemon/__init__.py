"""Fumarole service process: the scheduler core, cache, adapters, runtime and CLI.

Importing the package asks numpy (imported later, by the scheduler) for one OpenBLAS thread,
unless the environment already says how many (`OPENBLAS_NUM_THREADS`):

* determinism: the one matrix product a session makes (fgd's fragmentation,
  plugins/fgd_fragmentation.py) may sum in another order with more threads on wide inputs, so
  a decision could depend on the machine's core count;
* speed: OpenBLAS starts a worker per CPU whose idle spinning takes CPU from the process's own
  threads (~0.1 CPU s per start here), and no product the scheduler makes is large enough to
  gain from them.
"""

import os as _os
import sys as _sys

if "numpy" not in _sys.modules:
    _os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
