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

from polymnesia.errors import ConfigError
from polymnesia.training.config import train_configs

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


#: the package each tracker needs (its pip name)
TRACKER_PACKAGES = {
    "tensorboard": "tensorboard",
    "mlflow": "mlflow-skinny",
    "wandb": "wandb",
    "comet_ml": "comet-ml",
    "aim": "aim",
    "clearml": "clearml",
}


def tracker_available(name: str) -> bool:
    """Whether Accelerate finds ``name``'s package in this environment."""
    import accelerate.utils.imports as imports

    found = getattr(imports, f"is_{name}_available", None)
    return bool(found and found())


def check_trackers(node: Any, where: str) -> None:
    """Refuse, in one line, a tracker whose package is not installed: Accelerate only warns
    and the run then logs to nothing, which a long run finds out at its end."""
    for path, cfg in train_configs(node):
        for name in cfg.trackers:
            if not tracker_available(name):
                key = f"{path}.trackers" if path else "trackers"
                have = [n for n in TRACKER_PACKAGES if tracker_available(n)]
                raise ConfigError(
                    f"{where}: {key} names {name}, whose package is not installed "
                    f"(pip install {TRACKER_PACKAGES[name]}); installed here: "
                    f"{', '.join(have) or 'none'}"
                )
