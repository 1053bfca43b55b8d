"""Process topology through Accelerate, CPU multi-process (gloo) included.

Accelerate only treats a ``torchrun``-launched CPU job as distributed when it is
told to use the CPU; on machines without CUDA we say so, so that
``torchrun --nproc_per_node 2 -m polymnesia.cli.main run ...`` works on a laptop
exactly as ``accelerate launch`` does on GPUs.
"""

from __future__ import annotations

from typing import Any

import torch


def use_cpu() -> bool:
    return not torch.cuda.is_available()


def partial_state() -> Any:
    from accelerate import PartialState

    return PartialState(cpu=use_cpu())
