"""Resumable training checkpoints written and read by polymnesia alone, without pickle.

A checkpoint ``checkpoints/step_NNNNNNN/`` holds

- ``model.safetensors``: the (unwrapped) model's weights;
- ``optimizer``, ``scheduler``, ``loop`` (step, tokens, loss, data position,
  plugin states), ``scaler`` (fp16 only) and ``rng_RANK`` (Python, NumPy,
  torch CPU and CUDA generators of each process): trees saved by
  :mod:`polymnesia.training.state_io` (JSON + safetensors);
- ``checkpoint.json``, written last: format, step, loss, ``finite: true`` and
  the size and SHA-256 of every file above.

A checkpoint is only written when the loss and every parameter are finite, so
the newest valid checkpoint is always a good one to resume from or to name
after a divergence. The manifest is authoritative, and its ``finite: true`` is
not trusted: a checkpoint is usable (:func:`problem`) when every listed file
has its recorded size and SHA-256, it lists ``model.safetensors``, no file the
loader would read (``*.json``, ``*.safetensors``) lies there unlisted, and every
weight in ``model.safetensors`` is finite (checked one tensor at a time). A
damaged checkpoint is reported in one line and the next older one is tried.
:class:`Checkpointer` saves and resumes a training run's state through these, with the
trees its engine names (:meth:`polymnesia.training.engines.Engine.checkpoint_trees`).
:func:`load` reads only listed files, checks their sizes, and checks the loaded
parameters are finite. A sharded (FSDP2) checkpoint resumes on another number of
processes than wrote it: :class:`Reshard` cuts each process's rows out of the written
shards. Files that are not in the manifest (an Accelerate
``custom_checkpoint_0.pkl``, say) are never read, and folders written by older
polymnesia versions (Accelerate's pickle-based ``save_state``) are skipped
rather than unpickled.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from polymnesia.errors import PolymnesiaError, TrainingDiverged
from polymnesia.io import atomic_write_json, sha256_file
from polymnesia.training.engines import Engine
from polymnesia.training.fsdp import local, shard_rows
from polymnesia.training.reshard import Reshard, loop_layout, owner, processes
from polymnesia.training.state_io import load_tree, save_tree

FORMAT = 1
MANIFEST = "checkpoint.json"
MODEL = "model.safetensors"
CKPT_RE = re.compile(r"^step_(\d+)$")


def say(message: str) -> None:
    print(f"[polymnesia] {message}", file=sys.stderr, flush=True)


def checkpoints(ckpt_dir: Path) -> list[tuple[int, Path]]:
    """Every ``step_N`` folder, oldest first (valid or not)."""
    if not ckpt_dir.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in ckpt_dir.iterdir() if (m := CKPT_RE.match(p.name))]
    return sorted(found)


def params_finite(model: torch.nn.Module) -> bool:
    """Every parameter finite (this process's shards of a sharded model)."""
    return all(bool(torch.isfinite(local(p.detach())).all()) for p in model.parameters())


def model_files(meta: dict[str, Any]) -> list[str]:
    """The weight files a manifest names: ``model.safetensors``, or one shard file per
    process for a sharded (FSDP2) run."""
    shards = meta.get("model_shards")
    if isinstance(shards, int) and not isinstance(shards, bool) and shards > 0:
        return [f"model_rank{r}.safetensors" for r in range(shards)]
    return [MODEL]


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    # one generator per visible device: restored where the devices are as many as when saved
    if "cuda" in state and torch.cuda.is_available():
        if len(state["cuda"]) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(state["cuda"])
        else:
            say(
                f"the checkpoint's RNG state is for {len(state['cuda'])} CUDA devices, this "
                f"process sees {torch.cuda.device_count()}; CUDA RNG not restored"
            )


def save(
    acc: Any,
    ckpt_dir: Path,
    step: int,
    keep: int,
    states: dict[str, Callable[[], Any]],
    model: torch.nn.Module,
    loss: float,
    *,
    rank_states: dict[str, Callable[[], Any]] | None = None,
    layout: Callable[[], dict[str, Any]] | None = None,
    resharding: Callable[[], dict[str, Any]] | None = None,
) -> None:
    """Write checkpoint ``step`` (atomically: a temporary folder renamed when whole).

    ``states`` maps a file stem to a function returning its tree (called on the
    main process); every process writes its own RNG state, and each tree of
    ``rank_states`` as ``STEM_rankR`` (a sharded model's ``model`` and ``optimizer``
    shards: no ``model.safetensors`` is written then). ``layout`` gives a sharded model's
    tensors with their full shapes and placements (:func:`polymnesia.training.fsdp.shard_layout`),
    kept in the manifest as ``shard_layout`` so that :func:`problem` checks every process's
    shard against it. ``resharding`` gives what else a sharded checkpoint needs to be cut for
    another number of processes (``optimizer_params``: the optimizer's parameters by name, in
    its state's order; ``loop_layout``: the loop-state tensors that hold shards), kept in the
    manifest too.
    """
    from safetensors.torch import save_model

    tmp = ckpt_dir / f".tmp_step_{step:07d}"
    if acc.is_main_process and tmp.exists():
        shutil.rmtree(tmp)
    acc.wait_for_everyone()
    tmp.mkdir(parents=True, exist_ok=True)
    save_tree(tmp, f"rng_{acc.process_index}", rng_state())
    rank_states = rank_states or {}
    for stem, get in rank_states.items():
        save_tree(tmp, f"{stem}_rank{acc.process_index}", get())
    sharded = "model" in rank_states
    if acc.is_main_process and not sharded:
        save_model(acc.unwrap_model(model), str(tmp / MODEL))
    if acc.is_main_process:
        for stem, get in states.items():
            save_tree(tmp, stem, get())
    acc.wait_for_everyone()
    if acc.is_main_process:
        files = {
            p.name: {"size": p.stat().st_size, "sha256": sha256_file(p)}
            for p in sorted(tmp.iterdir())
            if p.is_file() and not p.name.startswith(".")
        }
        meta = {"format": FORMAT, "step": step, "loss": loss, "finite": True, "files": files}
        if sharded:
            meta["model_shards"] = acc.num_processes
            if layout is not None:
                meta["shard_layout"] = layout()
            if resharding is not None:
                meta.update(resharding())
        atomic_write_json(tmp / MANIFEST, meta)
        os.replace(tmp, ckpt_dir / f"step_{step:07d}")
        for _, old in checkpoints(ckpt_dir)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    acc.wait_for_everyone()


def last_good_text(ckpt_dir: Path) -> str:
    """The newest good checkpoint, for an error message: ``PATH (step N)`` or ``none yet``."""
    good = latest_good(ckpt_dir)
    return f"{good[1]} (step {good[0]})" if good else "none yet"


class Checkpointer:
    """Saves and restores everything a resumed run needs: the model, the optimizer, the
    scheduler, the loop's states ``loop`` (each with ``state_dict``/``load_state_dict``), the
    fp16 scaler and the RNG states, each tree written by the process ``engine`` names."""

    def __init__(
        self,
        acc: Any,
        engine: Engine,
        model: Any,
        optimizer: Any,
        scheduler: Any,
        loop: dict[str, Any],
    ) -> None:
        self.acc, self.engine, self.model, self.loop = acc, engine, model, loop
        loop_tree = (lambda: {k: v.state_dict() for k, v in loop.items()}, self._load_loop)
        trees = engine.checkpoint_trees(model, optimizer, loop_tree)
        shared = {"scheduler": (scheduler.state_dict, scheduler.load_state_dict), **trees.shared}
        if getattr(acc, "scaler", None) is not None:
            shared["scaler"] = (acc.scaler.state_dict, acc.scaler.load_state_dict)
        self.getters: dict[str, Callable[[], Any]] = {k: get for k, (get, _) in shared.items()}
        self.putters: dict[str, Callable[[Any], None]] = {k: put for k, (_, put) in shared.items()}
        #: trees every process writes and reads for itself (its shards, under FSDP2)
        self.rank_getters = {k: get for k, (get, _) in trees.per_rank.items()}
        self.rank_putters = {k: put for k, (_, put) in trees.per_rank.items()}
        self.layout, self.param_names = trees.layout, trees.param_names

    def _resharding(self) -> dict[str, Any]:
        """The manifest's ``optimizer_params`` and ``loop_layout`` (a sharded model's)."""
        out: dict[str, Any] = {"loop_layout": loop_layout(self.loop, self.model)}
        if self.param_names is not None:
            out["optimizer_params"] = self.param_names()
        return out

    def _load_loop(self, state: dict[str, Any]) -> None:
        for key, obj in self.loop.items():
            obj.load_state_dict(state[key])

    def save(self, ckpt_dir: Path, step: int, loss: float, keep: int) -> None:
        """Checkpoint only a finite state, so a named checkpoint is always a good one."""
        self.engine.settle(self.model)  # a forward pass outside training may have left it gathered
        finite = math.isfinite(loss) and params_finite(self.model)
        if not self.engine.agree(self.acc, finite):  # with shards, every process must agree
            raise TrainingDiverged(
                f"parameters became non-finite after the update of step {step}; "
                f"last good checkpoint: {last_good_text(ckpt_dir)}; lower train.lr or check "
                "the data"
            )
        save(
            self.acc,
            ckpt_dir,
            step,
            keep,
            self.getters,
            self.model,
            loss,
            rank_states=self.rank_getters,
            layout=self.layout,
            resharding=self._resharding if self.layout is not None else None,
        )

    def resume(self, ckpt_dir: Path) -> Path | None:
        """Load the newest good checkpoint (saying why newer ones are unusable, and dropping
        them); its path, or None when there is none."""
        if self.acc.is_main_process:
            latest_good(ckpt_dir, report=True, remove=True)
        self.acc.wait_for_everyone()
        found = latest_good(ckpt_dir)
        if found is None:
            return None
        load(
            self.acc,
            found[1],
            self.model,
            self.putters,
            rank_loaders=self.rank_putters,
            params=self.param_names() if self.param_names is not None else None,
            owner=lambda where: owner(self.loop, where),
        )
        return found[1]


def problem(path: Path) -> str:
    """Why the checkpoint at ``path`` cannot be used ("" if it can)."""
    meta_path = path / MANIFEST
    if not meta_path.is_file():
        if any(path.glob("*.pkl")) or any(path.glob("*.bin")):
            return "written by an older polymnesia (pickle-based Accelerate state), not loaded"
        return f"no {MANIFEST} (interrupted while being written)"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        files = meta["files"]
        fmt, finite = meta.get("format"), meta.get("finite")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
        return f"{MANIFEST} is unreadable"
    if fmt != FORMAT:
        return f"format {fmt!r}, this polymnesia reads format {FORMAT}"
    if finite is not True:
        return "not marked finite"
    weights = model_files(meta)
    if not isinstance(files, dict) or any(w not in files for w in weights):
        return f"{MANIFEST} does not list {', '.join(weights)}"
    if "model_shards" in meta and not isinstance(meta.get("shard_layout"), dict):
        return f"{MANIFEST} records no shard_layout (written by an older polymnesia); not loaded"
    for name, rec in files.items():
        if not isinstance(name, str) or "/" in name or name.startswith(".") or name == MANIFEST:
            return f"{MANIFEST} lists {name!r}, not a file of the checkpoint"
        f = path / name
        if not f.is_file():
            return f"{name} is missing"
        if not isinstance(rec, dict):
            return f"{MANIFEST} has a malformed row for {name}"
        if f.stat().st_size != rec.get("size") or sha256_file(f) != rec.get("sha256"):
            return f"{name} differs from its recorded sha256"
    unlisted = [p.name for p in _readable(path) if p.name not in files]
    if unlisted:
        return f"{unlisted[0]} is not listed in {MANIFEST}"
    if "model_shards" in meta:
        why = _shard_problem(path, meta["model_shards"], meta["shard_layout"])
        if why:
            return why
    for w in weights:
        why = _nonfinite(path / w)
        if why:
            return why
    return ""


def _shard_problem(path: Path, world: int, layout: dict[str, Any]) -> str:
    """ "" when every process's ``model_rankR`` holds each tensor of ``layout`` in the shape
    its placement implies (dimension 0 split as FSDP2 splits it, or whole), else the first
    shard that does not (e.g. a full tensor saved while the module was gathered)."""
    from safetensors import safe_open

    for rank in range(world):
        stem = f"model_rank{rank}"
        try:
            tree = json.loads((path / f"{stem}.json").read_text(encoding="utf-8"))
            with safe_open(str(path / f"{stem}.safetensors"), framework="pt", device="cpu") as f:
                shapes = {
                    name: list(f.get_slice(ref["__tensor__"]).get_shape())
                    for name, ref in tree.items()
                }
        except Exception as e:  # a malformed tree or weights file: its own error types
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            return f"{stem} cannot be read ({why})"
        if set(shapes) != set(layout):
            extra = sorted(set(shapes) ^ set(layout))[:2]
            return f"{stem} and the manifest's shard_layout name different tensors ({extra})"
        for name, rec in layout.items():
            try:
                full, placement = [int(d) for d in rec["shape"]], rec["placement"]
            except (KeyError, TypeError, ValueError):
                return f"{MANIFEST} has a malformed shard_layout row for {name}"
            want = list(full)
            if placement == "shard0" and full:
                want[0] = shard_rows(full[0], world, rank)
            elif placement != "replicate":
                return f"{MANIFEST} gives {name} the unknown placement {placement!r}"
            if shapes[name] != want:
                return (
                    f"{stem} holds {name} as {tuple(shapes[name])}, but its shard of "
                    f"{tuple(full)} on {world} processes is {tuple(want)} (saved while gathered?)"
                )
    return ""


def _readable(path: Path) -> list[Path]:
    """Files of the checkpoint that :func:`load` could read (state trees and weights)."""
    return sorted(
        p
        for p in path.iterdir()
        if p.suffix in (".json", ".safetensors") and p.name != MANIFEST and p.is_file()
    )


def _nonfinite(weights: Path) -> str:
    """ "" when every tensor of ``weights`` is finite, else which one is not (or why the file
    cannot be read)."""
    from safetensors import safe_open

    try:
        with safe_open(str(weights), framework="pt", device="cpu") as f:
            for key in f.keys():  # noqa: SIM118  (safe_open has no __iter__)
                t = f.get_tensor(key)
                if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                    return f"{weights.name} holds non-finite values ({key}), though marked finite"
    except Exception as e:  # safetensors raises its own error types for a malformed file
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        return f"{weights.name} cannot be read ({why})"
    return ""


def _manifest(path: Path) -> dict[str, Any]:
    """The checkpoint's manifest; one line if it is unreadable."""
    try:
        meta = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        meta = None
    if not isinstance(meta, dict):
        raise PolymnesiaError(f"checkpoint {path}: {MANIFEST} is missing or unreadable; not loaded")
    return meta


def _manifest_files(path: Path) -> dict[str, Any]:
    """The ``files`` rows of the checkpoint's manifest; one line if there is none."""
    try:
        files = json.loads((path / MANIFEST).read_text(encoding="utf-8"))["files"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
        files = None
    if not isinstance(files, dict):
        raise PolymnesiaError(f"checkpoint {path}: {MANIFEST} is missing or unreadable; not loaded")
    return files


def latest_good(
    ckpt_dir: Path, *, report: bool = False, remove: bool = False
) -> tuple[int, Path] | None:
    """The newest checkpoint that verifies; ``report``: say why newer ones were skipped;
    ``remove``: delete those (so that checkpoint rotation never keeps them over good ones)."""
    for step, path in reversed(checkpoints(ckpt_dir)):
        why = problem(path)
        if not why:
            return step, path
        if report:
            say(f"checkpoint {path} skipped: {why}" + ("; removed" if remove else ""))
        if remove:
            shutil.rmtree(path, ignore_errors=True)
    return None


def load(
    acc: Any,
    path: Path,
    model: torch.nn.Module,
    loaders: dict[str, Callable[[Any], None]],
    *,
    rank_loaders: dict[str, Callable[[Any], None]] | None = None,
    params: list[str] | None = None,
    owner: Callable[[list[str]], str] | None = None,
) -> None:
    """Restore a checkpoint written by :func:`save` (every process reads it).

    Only files that ``checkpoint.json`` lists are read, each with its recorded size; a state
    tree's tensors file lying there unlisted, or weights that are not finite once loaded,
    refuse the checkpoint in one line (:func:`latest_good` has skipped such checkpoints).

    A sharded checkpoint written by another number of processes is cut for this one
    (:class:`Reshard`): ``params`` names the optimizer's parameters in this run (they must be
    the ones the checkpoint's optimizer state is for), ``owner`` names who keeps a loop state
    for the one line that refuses a per-process state that cannot be cut. A process the
    writers did not have takes process 0's RNG state."""
    from safetensors.torch import load_model

    files = _manifest_files(path)

    def listed(name: str) -> bool:
        if name not in files:
            return False
        rec = files[name]
        f = path / name
        if not f.is_file() or not isinstance(rec, dict) or f.stat().st_size != rec.get("size"):
            raise PolymnesiaError(f"checkpoint {path}: {name} differs from {MANIFEST}; not loaded")
        return True

    def tree(stem: str) -> Any:
        tensors = f"{stem}.safetensors"
        if not listed(tensors) and (path / tensors).exists():
            raise PolymnesiaError(
                f"checkpoint {path}: {tensors} is not listed in {MANIFEST}; not loaded"
            )
        return load_tree(path, stem)

    rank_loaders = rank_loaders or {}
    rank = acc.process_index
    rng = f"rng_{rank}"
    meta = _manifest(path)
    written = meta.get("model_shards")
    if "model" in rank_loaders and written != acc.num_processes:  # cut for this process count

        def listed_tree(stem: str) -> Any:
            if not listed(f"{stem}.json"):
                raise PolymnesiaError(f"checkpoint {path} has no {stem}; not loaded")
            return tree(stem)

        cut = Reshard(path, meta, (rank, acc.num_processes), listed_tree, owner)
        cut.load(rank_loaders, params)
        if acc.is_main_process:
            say(
                f"checkpoint {path}: written by {processes(written)}, resharded for "
                f"{processes(acc.num_processes)}"
            )
        rank_loaders, rng = {}, cut.rng_stem()
    elif "model" in rank_loaders:  # a sharded run: this process's shards
        if not listed(f"model_rank{rank}.json"):
            raise PolymnesiaError(
                f"checkpoint {path} holds no shards for process {rank}, though written by "
                f"{written} processes; not loaded"
            )
        if not listed(f"model_rank{rank}.safetensors"):
            raise PolymnesiaError(f"checkpoint {path}: model_rank{rank}.safetensors is missing")
    elif isinstance(written, int):
        raise PolymnesiaError(
            f"checkpoint {path} holds the shards of a sharded (FSDP2) run, this run's engine "
            "holds the whole model; resume it with train.engine: fsdp2"
        )
    elif not listed(MODEL):
        raise PolymnesiaError(f"checkpoint {path}: {MANIFEST} does not list {MODEL}; not loaded")
    else:
        load_model(acc.unwrap_model(model), str(path / MODEL), device=str(acc.device))
    for stem, put in rank_loaders.items():
        if not listed(f"{stem}_rank{rank}.json"):
            raise PolymnesiaError(f"checkpoint {path} has no {stem} state for process {rank}")
        put(tree(f"{stem}_rank{rank}"))
    if not params_finite(model):
        raise PolymnesiaError(
            f"checkpoint {path} holds non-finite weights, though marked finite; remove it"
        )
    for stem, put in loaders.items():
        if listed(f"{stem}.json"):
            put(tree(stem))
    if listed(f"{rng}.json"):
        set_rng_state(tree(rng))
    else:
        say(f"checkpoint {path} has no RNG state for process {rank}; RNG not restored")
