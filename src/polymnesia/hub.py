"""The Hugging Face Hub as seen before anything loads: whether its offline switches are set,
whether it answers, and whether an id is in the local cache. Torch-free: read by the checks
before a run and by the tokenizer loader."""

from __future__ import annotations

import os
import socket


def hub_offline(*, datasets: bool = True) -> bool:
    """True when Hugging Face's offline switches are set: ``HF_HUB_OFFLINE``, or
    ``HF_DATASETS_OFFLINE`` too unless ``datasets`` is false (models and tokenizers heed
    the first only)."""
    switches = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE") if datasets else ("HF_HUB_OFFLINE",)
    return any(
        os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on") for v in switches
    )


def hub_reachable(endpoint: str | None = None, timeout: float = 3.0) -> bool:
    """True if a TCP connection to the Hub endpoint (default: huggingface_hub's, which
    ``HF_ENDPOINT`` sets) opens within ``timeout`` seconds, or a proxy is configured."""
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return True
    if endpoint is None:
        from huggingface_hub import constants

        endpoint = constants.ENDPOINT
    scheme, _, rest = endpoint.rpartition("://")
    name, _, port = rest.split("/", 1)[0].partition(":")
    default_port = 80 if scheme == "http" else 443
    try:
        socket.create_connection((name, int(port or default_port)), timeout=timeout).close()
    except OSError:
        return False
    return True


def in_hub_cache(repo_id: str, filename: str = "config.json") -> bool:
    """Whether ``filename`` of the Hub repository ``repo_id`` is in the local Hugging Face
    cache (``HF_HOME``), so that it loads without the network."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(repo_id, filename), str)
    except ValueError:  # not a valid repository id
        return False
