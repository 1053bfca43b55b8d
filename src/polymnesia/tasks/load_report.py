"""What loading a language model into a classifier did, in a line or two.

transformers prints a load-report table as a warning whenever a checkpoint's keys and the
model's differ, which they always do when a language model becomes a classifier: its LM
head is left unused and the new head is missing. :func:`quiet_load_report` drops that
table for one load and :func:`head_report` says the same in a line, with a warning only
for what is worth one (weights of the body the checkpoint lacked).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch


@contextmanager
def quiet_load_report() -> Iterator[None]:
    """transformers' load report off for one ``from_pretrained`` (:func:`head_report` says
    what it would, in a line): loading a language model into a classifier always leaves its
    LM head unused and the new head missing, which transformers prints as a warning table."""
    hf_logger = logging.getLogger("transformers.modeling_utils")
    hf_logger.addFilter(_drop_load_report)  # (raising the logger's level would make
    try:  # transformers check and log a tensor-parallel plan instead)
        yield
    finally:
        hf_logger.removeFilter(_drop_load_report)


def _drop_load_report(record: logging.LogRecord) -> bool:
    return "LOAD REPORT" not in str(record.msg)


def head_report(
    model: torch.nn.Module, head: set[str], info: dict[str, Any], where: str, seed: int
) -> list[str]:
    """Log lines for a classifier loaded from ``where``: the new head (the checkpoint's
    missing keys among ``head``, the head's parameter names), what the checkpoint held that
    the classifier does not use, and a warning for weights of the body the checkpoint lacked
    (they start from their random initialisation, which a fine-tuning run rarely means)."""
    missing = sorted(str(k) for k in info.get("missing_keys", ()))
    new = [k for k in missing if k in head]
    body = [k for k in missing if k not in head]
    unused = sorted(str(k) for k in info.get("unexpected_keys", ()))
    line = f"{type(model).__name__} from {where}: new head {_names(new) or '(none)'} (seed {seed})"
    if unused:
        line += f"; not used from the checkpoint: {_names(unused)}"
    lines = [line]
    if body:
        lines.append(
            f"warning: {len(body)} weight(s) of the model body are not in {where} and start "
            f"untrained: {_names(body)}"
        )
    return lines


def _names(keys: list[str], shown: int = 4) -> str:
    more = f" and {len(keys) - shown} more" if len(keys) > shown else ""
    return ", ".join(keys[:shown]) + more
