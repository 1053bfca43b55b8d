"""Size presets for decoders built from scratch.

The active-forgetting paper (000, appendix A) scales the Mistral architecture
down "by reducing the hidden dimensions, number of attention heads and the total
number of Transformer blocks" to 400M, 782M and 1.6B parameters with a 32,000
token vocabulary. It does not list the dimensions; the ``paper-*`` presets below
are our choice of dimensions that land near those counts with a 32k vocabulary
and an untied LM head (as Mistral). The small presets are for CPUs and tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from polymnesia.registry import Registry


@dataclass(frozen=True)
class Preset:
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int


PRESETS: Registry[Preset] = Registry("model preset", "presets")
PRESETS.add("nano", Preset(32, 1, 2, 1, 96), "32 wide, 1 layer: unit tests (~0.1M body parameters)")
PRESETS.add("micro", Preset(64, 2, 4, 2, 192), "64 wide, 2 layers: end-to-end tests")
PRESETS.add("tiny", Preset(128, 2, 4, 2, 384), "128 wide, 2 layers: the quickstart on a laptop CPU")
PRESETS.add("mini", Preset(192, 3, 6, 2, 576), "192 wide, 3 layers: CPU scale sweeps")
PRESETS.add("small", Preset(256, 4, 8, 4, 768), "256 wide, 4 layers: a few minutes on a GPU")
PRESETS.add("base", Preset(512, 8, 8, 4, 1536), "512 wide, 8 layers (~30M body parameters)")
PRESETS.add(
    "paper-400m",
    Preset(1024, 24, 16, 8, 3584),
    "about 400M parameters with a 32k vocabulary (Aggarwal et al. 2024)",
)
PRESETS.add(
    "paper-782m",
    Preset(1536, 24, 16, 8, 4480),
    "about 780M parameters with a 32k vocabulary (Aggarwal et al. 2024)",
)
PRESETS.add(
    "paper-1.6b",
    Preset(2048, 28, 16, 8, 6144),
    "about 1.6B parameters with a 32k vocabulary (Aggarwal et al. 2024)",
)
