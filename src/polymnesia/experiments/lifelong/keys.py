"""Stage names of the lifelong protocol, shared by the builder and the report."""

from __future__ import annotations


def arm_key(method: str, rank: int | None) -> str:
    """``vanilla``, ``shared_lora_r4``: the arm's part of its stage names."""
    return f"{method}_r{rank}" if rank is not None else method
