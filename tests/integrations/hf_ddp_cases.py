"""The Trainer with polymnesia's callbacks on 2 gloo processes (DDP), for test_hf_ddp.py.

Run as ``python -m torch.distributed.run --nproc_per_node 2 hf_ddp_cases.py OUT``. Each case
trains a tiny Mistral from the same seed on the loop's batches (2 rows per process, 4 per
step) and leaves, from the first process, ``OUT/CASE.safetensors`` (the trained weights)
``OUT/CASE.warnings.json`` (the IntegrationWarning lines) and ``OUT/CASE.sharded.json``
(whether the Trainer sharded the model). ``frozen_rows_fsdp2`` asks for FSDP2 through
Accelerate (``fsdp_config`` version 2)."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import torch.distributed as dist
from hf_helpers import random_data, run_trainer, tiny_model, weights
from safetensors.torch import save_file

from polymnesia.integrations import FrozenRowsCallback, IntegrationWarning, L2SPCallback

#: fsdp asked through Accelerate (fsdp_version 2): on CPU Accelerate runs DDP instead
FSDP2 = {"fsdp": True, "fsdp_config": {"version": 2}}

CASES = {
    "frozen_rows": (lambda: [FrozenRowsCallback(30)], 0.0),
    "frozen_rows_fsdp2": (lambda: [FrozenRowsCallback(30)], 0.0),
    "frozen_rows_clipped": (lambda: [FrozenRowsCallback(30)], 1.0),
    "l2sp": (lambda: [L2SPCallback(alpha=0.5, beta=0.1)], 0.0),
}


def main(out: Path) -> None:
    for name, (make, clip) in CASES.items():
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always", IntegrationWarning)
            tr = run_trainer(
                tiny_model(),
                random_data(n=16),
                out / name,
                make(),
                per_device_train_batch_size=2,
                max_grad_norm=clip,
                **(FSDP2 if name.endswith("fsdp2") else {}),
            )
        if dist.get_rank() == 0:
            save_file(weights(tr.model), str(out / f"{name}.safetensors"))
            lines = [str(w.message) for w in seen if issubclass(w.category, IntegrationWarning)]
            (out / f"{name}.warnings.json").write_text(json.dumps(lines))
            sharded = any(type(p).__name__ == "DTensor" for p in tr.model.parameters())
            (out / f"{name}.sharded.json").write_text(json.dumps(sharded))
        dist.barrier()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
