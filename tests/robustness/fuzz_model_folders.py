"""The fuzzer's class "hostile model folders": a tiny Llama folder (2 layers, its own tokenizer)
damaged in seeded ways, each pointed at by ``model.name_or_path`` of the quickstart and run
through ``polymnesia validate`` and ``polymnesia run --dry-run`` in this process
(:func:`fuzz_configs.call` classifies the outcome).

Damage: ``config.json``'s sizes (2**40, negative, zero, fractions, text, booleans), the file
itself (not UTF-8, not JSON, a list, missing), sizes that disagree with the weights; the
safetensors header (its 8-byte length field, bytes that are not JSON, a tensor that claims
more bytes than the file has, one whose bytes are not ``dtype x shape``, an unknown dtype, a
truncated file, an empty one); the weights missing, or a shard index naming files outside
the folder; an ``auto_map`` naming Python files in the folder (which must not run: each
writes a marker file if imported); a tokenizer that is not the model's, one whose ids do not
fit, a folder without one. Every case must be refused in one line, none accepted, none a
traceback.

Run it as a script to see each outcome: ``python tests/robustness/fuzz_model_folders.py [SEED]``.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fuzz_configs import CONFIGS, Mutation, Outcome, call

#: values a size in config.json must not take
HOSTILE_SIZES: list[Any] = [2**40, 2**63, -1, -(2**40), 0, 1.5, "16", True, [16], {"a": 1}]
SIZE_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers")
SIZE_KEYS_MORE = ("num_attention_heads", "num_key_value_heads", "max_position_embeddings")
#: the code an ``auto_map`` points at: it leaves a marker if it is ever imported
MARKER_CODE = "import pathlib\npathlib.Path(__file__).with_name('RAN').write_text('ran')\n"


def tiny_folder(folder: Path, vocab_size: int = 300) -> Path:
    """A 2-layer Llama (16 wide) with its own byte-level BPE, saved as an HF folder."""
    from polymnesia.testing import save_tiny, tiny_bpe

    return save_tiny(folder, "llama", tiny_bpe(vocab_size=vocab_size), num_hidden_layers=2)


def header_of(weights: Path) -> tuple[dict[str, Any], bytes]:
    """The JSON header of a safetensors file and the data after it."""
    raw = weights.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


def write_header(
    weights: Path, header: dict[str, Any] | bytes, data: bytes, length: int | None = None
) -> None:
    """A safetensors file of ``header`` (a dict, or raw bytes) and ``data``; ``length`` replaces
    the 8-byte length field."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    weights.write_bytes(struct.pack("<Q", len(text) if length is None else length) + text + data)


def edit_config(folder: Path, **changes: Any) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config.update(changes)
    path.write_text(json.dumps(config), encoding="utf-8")


Damage = Callable[[Path, random.Random], None]


def _tensor_name(header: dict[str, Any], rng: random.Random) -> str:
    return rng.choice(sorted(k for k in header if k != "__metadata__"))


def damages(rng: random.Random) -> Iterator[tuple[str, Damage, list[str]]]:
    """(case name, damage done to a copy of the tiny folder, extra overrides)."""
    for key in (*SIZE_KEYS, rng.choice(SIZE_KEYS_MORE)):
        for value in rng.sample(HOSTILE_SIZES, 3):
            yield (
                f"config {key}={json.dumps(value)}",
                lambda f, r, key=key, value=value: edit_config(f, **{key: value}),
                [],
            )
    yield (
        "config nested text_config size",
        lambda f, r: edit_config(f, text_config={"hidden_size": -(2**40)}),
        [],
    )
    yield "config not utf-8", lambda f, r: (f / "config.json").write_bytes(b"\xff\xfe{}"), []
    yield "config not json", lambda f, r: (f / "config.json").write_text("{hidden_size: 16"), []
    yield "config a list", lambda f, r: (f / "config.json").write_text("[1, 2]"), []
    yield "config deep", lambda f, r: (f / "config.json").write_text("[" * 5000 + "]" * 5000), []
    yield "config missing", lambda f, r: (f / "config.json").unlink(), []
    yield (
        "config vocab disagrees",
        lambda f, r: edit_config(f, vocab_size=r.choice([299, 301, 4096])),
        [],
    )
    yield "config width disagrees", lambda f, r: edit_config(f, hidden_size=32, head_dim=16), []
    yield (
        "config layers disagree",
        lambda f, r: edit_config(f, num_hidden_layers=r.choice([1, 3])),
        [],
    )
    yield "config unknown model_type", lambda f, r: edit_config(f, model_type="no_such_model"), []

    def header_length(value: int) -> Damage:
        def damage(f: Path, r: random.Random) -> None:
            h, data = header_of(f / "model.safetensors")
            write_header(f / "model.safetensors", h, data, length=value)

        return damage

    for value in (2**60, 2**64 - 1, rng.randrange(10**6, 10**8), 0):
        yield f"header length {value}", header_length(value), []

    def header_bytes(text: bytes) -> Damage:
        return lambda f, r: write_header(
            f / "model.safetensors", text, header_of(f / "model.safetensors")[1]
        )

    yield "header not json", header_bytes(b"{not json"), []
    yield "header not utf-8", header_bytes(b"\xff\xfe\xfd"), []
    yield "header a list", header_bytes(b"[]"), []

    def tensor(change: Callable[[dict[str, Any], random.Random], None]) -> Damage:
        def damage(f: Path, r: random.Random) -> None:
            h, data = header_of(f / "model.safetensors")
            change(h[_tensor_name(h, r)], r)
            write_header(f / "model.safetensors", h, data)

        return damage

    def grow(entry: dict[str, Any], r: random.Random) -> None:
        entry["data_offsets"][1] += r.choice([4, 10**9, 2**62])

    def shape(entry: dict[str, Any], r: random.Random) -> None:
        entry["shape"] = [entry["shape"][0] * r.choice([2, 10**6]), *entry["shape"][1:]]

    yield "tensor larger than the file", tensor(grow), []
    yield "tensor shape not its bytes", tensor(shape), []
    yield "tensor negative offset", tensor(lambda e, r: e.update(data_offsets=[-8, 0])), []
    yield "tensor negative shape", tensor(lambda e, r: e.update(shape=[-1, 16])), []
    yield "tensor unknown dtype", tensor(lambda e, r: e.update(dtype="F128")), []
    yield "tensor offsets text", tensor(lambda e, r: e.update(data_offsets="0-4")), []
    yield "tensor not an object", tensor(lambda e, r: e.clear()), []

    def truncate(f: Path, r: random.Random) -> None:
        raw = (f / "model.safetensors").read_bytes()
        (f / "model.safetensors").write_bytes(raw[: r.randrange(8, len(raw) - 1)])

    yield "weights truncated", truncate, []
    yield "weights empty", lambda f, r: (f / "model.safetensors").write_bytes(b""), []
    yield "weights 8 zero bytes", lambda f, r: (f / "model.safetensors").write_bytes(b"\0" * 8), []
    yield "weights missing", lambda f, r: (f / "model.safetensors").unlink(), []

    def index(shard: str) -> Damage:
        def damage(f: Path, r: random.Random) -> None:
            h, _ = header_of(f / "model.safetensors")
            (f / "model.safetensors").rename(f / "model-00001-of-00001.safetensors")
            weight_map = {k: "model-00001-of-00001.safetensors" for k in h if k != "__metadata__"}
            weight_map[_tensor_name(h, r)] = shard
            index = {"metadata": {}, "weight_map": weight_map}
            (f / "model.safetensors.index.json").write_text(json.dumps(index))

        return damage

    for shard in ("../../etc/passwd", "/etc/passwd", "missing.safetensors", "config.json"):
        yield f"index shard {shard}", index(shard), []

    def auto_map(model_type: str | None) -> Damage:
        def damage(f: Path, r: random.Random) -> None:
            (f / "modeling_evil.py").write_text(MARKER_CODE)
            (f / "configuration_evil.py").write_text(MARKER_CODE)
            changes: dict[str, Any] = {
                "auto_map": {
                    "AutoConfig": "configuration_evil.EvilConfig",
                    "AutoModelForCausalLM": "modeling_evil.EvilForCausalLM",
                }
            }
            if model_type is not None:
                changes["model_type"] = model_type
            edit_config(f, **changes)

        return damage

    yield "auto_map, own model_type", auto_map("evil"), []
    yield "auto_map, llama model_type", auto_map(None), []

    def no_tokenizer(f: Path, r: random.Random) -> None:
        for name in ("tokenizer.json", "tokenizer_config.json"):
            (f / name).unlink()

    yield "no tokenizer", no_tokenizer, []
    yield "another tokenizer", lambda f, r: None, ["tokenizer.name_or_path={other}"]
    yield (
        "a trained tokenizer's size",
        lambda f, r: no_tokenizer(f, r),
        ["tokenizer.name_or_path={larger}"],
    )


def fuzz_model_folders(root: Path, seed: int = 0) -> list[Outcome]:
    """Every damage of :func:`damages` on a fresh copy of the tiny folder, through
    ``validate`` and ``run --dry-run``; each outcome's detail also says whether the folder's
    code ran (it must not)."""
    import polymnesia.stages  # noqa: F401
    from polymnesia.testing import tiny_bpe
    from polymnesia.tokenizers.bpe import save_tokenizer

    rng = random.Random(seed)
    pristine = tiny_folder(root / "pristine")
    other = root / "other-tokenizer"
    save_tokenizer(tiny_bpe(vocab_size=320), other)
    larger = root / "larger-tokenizer"
    save_tokenizer(tiny_bpe(vocab_size=400), larger)
    quick = str(CONFIGS / "quickstart.yaml")
    outcomes: list[Outcome] = []
    for i, (name, damage, extra) in enumerate(damages(rng)):
        folder = root / f"case-{i}"
        shutil.copytree(pristine, folder)
        damage(folder, rng)
        overrides = [f"model.name_or_path={folder}"]
        overrides += [x.format(other=other, larger=larger) for x in extra]
        for command in ("validate", "dry-run"):
            m = Mutation(
                "quickstart.yaml", "hostile_model_folder", name, "refuse", b"", overrides, command
            )
            if command == "validate":
                argv = ["validate", quick, *(x for o in overrides for x in ("--set", o))]
            else:
                argv = ["run", quick, *overrides, "--dry-run", "--run-dir", str(root / "run")]
            outcome = call(m, argv)
            if (folder / "RAN").exists():
                outcome = Outcome(m, "traceback", f"the folder's code ran; {outcome.detail}")
            outcomes.append(outcome)
    return outcomes


if __name__ == "__main__":
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("POLYMNESIA_CACHE", str(Path(tmp) / "cache"))
        results = fuzz_model_folders(Path(tmp), int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    for o in results:
        print(f"{o.result:9s} {o.mutation.command:9s} {o.mutation.path:36s} {o.detail[:160]}")
    print(
        f"{len(results)} hostile model folders: "
        + ", ".join(
            f"{k} {sum(o.result == k for o in results)}"
            for k in ("refused", "accepted", "traceback")
        )
    )
