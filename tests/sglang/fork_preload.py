"""Imported by the fork server of the real-sglang order matrix (``test_real_sglang.py``: ``multiprocessing``'s
forkserver) before it forks each order's fresh process: the stand-ins sglang's imports need on this machine,
then the third-party modules an order ended with (``real_sglang.learnt_modules``). A module that fails to
import here is left to the children, which import it themselves."""

import contextlib
import importlib
import warnings

import cpu_shims
import real_sglang

cpu_shims.prepare()  # before torch's users: the torchvision operators, sglang 0.5.5's sgl_kernel stub
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for name in real_sglang.learnt_modules():
        with contextlib.suppress(Exception):
            importlib.import_module(name)
