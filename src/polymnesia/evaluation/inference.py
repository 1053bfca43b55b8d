"""Loading and placing models for inference, the one call every model-running stage makes.

``load_for_inference(folder, stage=..., precision=..., sharded=...)`` loads a
model folder and puts the model on the device of the process's
:class:`~polymnesia.runtime.Runtime`, cast to the evaluation precision
(``no`` keeps float32; ``bf16``/``fp16`` halve memory and run the tensor
cores), in eval mode. Scoring code then runs under ``torch.inference_mode``
(:func:`polymnesia.evaluation.likelihood.sequence_nll` and its neighbours).
``sharded`` is True only for stages marked ``distributed`` (they run on every
process and gather their results); a main-process-only stage sees one process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import torch

from polymnesia.models.io import load_model_and_tokenizer
from polymnesia.runtime import Precision, Runtime, current

M = TypeVar("M", bound=torch.nn.Module)


def place_for_inference(
    model: M, *, stage: str, precision: Precision = "no", sharded: bool = False
) -> tuple[M, Runtime]:
    """``model`` on the current runtime's device in ``precision`` (eval mode), and the runtime."""
    rt = current(precision, sharded=sharded)
    return rt.place(model, stage=stage), rt


def load_for_inference(
    folder: Path, *, stage: str, precision: Precision = "no", sharded: bool = False
) -> tuple[torch.nn.Module, Any, Runtime]:
    """The model of ``folder`` placed by :func:`place_for_inference`, its tokenizer, the runtime."""
    model, tokenizer = load_model_and_tokenizer(Path(folder))
    placed, rt = place_for_inference(model, stage=stage, precision=precision, sharded=sharded)
    return placed, tokenizer, rt
