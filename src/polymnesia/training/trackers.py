"""Experiment trackers (TensorBoard, MLflow, W&B, Aim, ...) through Accelerate.

Trackers take hyperparameters as flat scalars: TensorBoard's ``add_hparams``
refuses lists and None (``ValueError`` at the first step), MLflow and W&B
store nested values as opaque strings. :func:`flat_config` turns a config
into ``{"a.b": scalar}``: nested mappings become dotted keys, lists and
tuples a JSON string, None the string ``"none"``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

Scalar = int | float | str | bool


def flat_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Scalar]:
    """``config`` flattened to dotted keys with scalar values (see the module docstring)."""
    out: dict[str, Scalar] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flat_config(value, f"{name}."))
        elif value is None:
            out[name] = "none"
        elif isinstance(value, (bool, int, float, str)):
            out[name] = value
        else:
            out[name] = json.dumps(value, sort_keys=True, default=str)
    return out
