"""Script for the 2-process test: train a tiny model with active forgetting, save its weights.

Run as ``python af_two_procs.py OUT`` or under ``torch.distributed.run --nproc_per_node 2``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from methods_helpers import random_data, tiny_model, train_cfg  # noqa: E402

from polymnesia.methods.active_forgetting import ActiveForgetting  # noqa: E402
from polymnesia.training.loop import train  # noqa: E402

if __name__ == "__main__":
    out = Path(sys.argv[1])
    model, _ = train(
        tiny_model(),
        random_data(),
        train_cfg(7),
        out,
        seed=0,
        plugins=[ActiveForgetting(reset_every=3, replay_schedule=True)],
    )
    import os

    if int(os.environ.get("RANK", "0")) == 0:
        torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, out / "weights.pt")
    from polymnesia.runtime import shutdown

    shutdown()  # leave the gloo group before exit, as the CLI does
