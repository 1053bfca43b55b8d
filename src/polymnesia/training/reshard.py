"""A sharded (FSDP2) checkpoint's per-process trees cut for another number of processes.

:func:`polymnesia.training.checkpoint.load` uses :class:`Reshard` when a sharded checkpoint
was written by another number of processes than the run resuming it has: the manifest's
``shard_layout``, ``optimizer_params`` and ``loop_layout`` say how each tree is split.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from polymnesia.errors import PolymnesiaError
from polymnesia.training.fsdp import copy_flat_rows, copy_rows, flat_size, local_shape


class Reshard:
    """A sharded checkpoint's per-process trees cut for another number of processes.

    ``current`` is this process's ``(rank, world)``; ``read`` reads a listed tree of the
    checkpoint. Each writer's trees are read in turn (one at a time: never the whole model
    or optimizer in one process), and the rows of each sharded tensor that this process holds
    in the new layout are copied out of every written shard that overlaps them:

    - ``model``: each tensor of the manifest's ``shard_layout`` (``shard0``: by rows;
      ``replicate``: process 0's);
    - ``optimizer``: each per-parameter state tensor shaped as its parameter's shard
      (AdamW's moments), by the manifest's ``optimizer_params``; scalars (the step) and the
      parameter groups are process 0's;
    - ``loop``: the tensors the manifest's ``loop_layout`` names (flat vectors over the local
      shards of the parameters it lists, as LF-MLF's accumulated update), by rows of each
      parameter; every other value must be the same in every writer's tree (a counter, a
      data position, a seeded generator), else the checkpoint is refused in one line naming
      who keeps it (a state of one process that no layout describes cannot be cut).

    Any other per-process tree is refused.
    """

    def __init__(
        self,
        path: Path,
        meta: dict[str, Any],
        current: tuple[int, int],
        read: Callable[[str], Any],
        owner: Callable[[list[str]], str] | None = None,
    ) -> None:
        self.path, self.current, self.read = path, current, read
        self.owner = owner or (lambda p: f"loop state '{p[0]}'")
        written = meta.get("model_shards")
        if not isinstance(written, int) or isinstance(written, bool) or written < 1:
            raise PolymnesiaError(
                f"checkpoint {path} holds the whole model (model.safetensors, an unsharded run), "
                "this run is sharded (FSDP2); resume it with the engine that wrote it"
            )
        self.written = written
        self.layout: dict[str, Any] = meta.get("shard_layout") or {}
        params, loop_layout = meta.get("optimizer_params"), meta.get("loop_layout")
        if not isinstance(params, list) or not isinstance(loop_layout, list):
            raise PolymnesiaError(
                f"checkpoint {path} was written by {processes(written)} and records no "
                "optimizer_params/loop_layout to cut it for this run's "
                f"{current[1]} (written by an older polymnesia); resume on {processes(written)}"
            )
        self.params: list[str] = [str(n) for n in params]
        self.loop_layout: list[Any] = loop_layout

    def _refuse(self, why: str) -> PolymnesiaError:
        return PolymnesiaError(
            f"checkpoint {self.path} was written by {processes(self.written)}, this run has "
            f"{self.current[1]}: {why}; resume on {processes(self.written)}"
        )

    def _shape(self, name: str) -> list[int]:
        rec = self.layout.get(name)
        if not isinstance(rec, dict) or rec.get("placement") != "shard0" or not rec.get("shape"):
            raise self._refuse(f"{name} is not a dimension-0 sharded tensor of its shard_layout")
        return [int(d) for d in rec["shape"]]

    def _mine(self, shape: list[int]) -> list[int]:
        """This process's shard shape of a tensor of full ``shape``."""
        return local_shape(shape, self.current[1], self.current[0])

    def _writers(self, stem: str) -> Iterator[tuple[int, Any]]:
        for r in range(self.written):
            yield r, self.read(f"{stem}_rank{r}")

    def check_params(self, params: list[str] | None) -> None:
        """Refuse when this run's optimizer is over other parameters than the checkpoint's."""
        if params is not None and params != self.params:
            raise self._refuse(
                "its optimizer state is for other parameters than this run's "
                f"({len(self.params)} vs {len(params)})"
            )

    def load(self, loaders: dict[str, Callable[[Any], None]], params: list[str] | None) -> None:
        """Cut every tree of ``loaders`` (all of them before any is loaded: a refusal leaves
        the run as it was) and load each, checking the optimizer's ``params`` first."""
        self.check_params(params)
        states = {stem: self.tree(stem) for stem in loaders}
        for stem, put in loaders.items():
            put(states[stem])

    def rng_stem(self) -> str:
        """The RNG state this process restores: its own, or process 0's where the writers
        had no such process (every process is seeded alike, :func:`accelerate.utils.set_seed`)."""
        rank = self.current[0]
        return f"rng_{rank}" if rank < self.written else "rng_0"

    def tree(self, stem: str) -> Any:
        """This process's ``stem`` tree, cut from the writers'."""
        if stem == "model":
            return self._model()
        if stem == "optimizer":
            return self._optimizer()
        if stem == "loop":
            return self._loop()
        raise self._refuse(f"its per-process state '{stem}' cannot be cut for another number")

    def _cut(self, out: torch.Tensor, src: Any, name: str, shape: list[int], r: int) -> None:
        want = local_shape(shape, self.written, r)
        if not isinstance(src, torch.Tensor) or list(src.shape) != want:
            got = tuple(src.shape) if isinstance(src, torch.Tensor) else type(src).__name__
            raise self._refuse(f"process {r}'s {name} is {got}, its shard is {tuple(want)}")
        copy_rows(out, src, shape, (r, self.written), self.current)

    def _model(self) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        for r, tree in self._writers("model"):
            for name, rec in self.layout.items():
                if name not in tree:
                    raise self._refuse(f"process {r}'s model shards lack {name}")
                if rec.get("placement") == "replicate":
                    out.setdefault(name, tree[name])
                    continue
                shape = self._shape(name)
                if r == 0:
                    out[name] = torch.empty(self._mine(shape), dtype=tree[name].dtype)
                self._cut(out[name], tree[name], name, shape, r)
        return out

    def _optimizer(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        sharded: list[tuple[Any, str, str, list[int]]] = []
        for r, tree in self._writers("optimizer"):
            if r == 0:
                out = {**tree, "state": {k: dict(v) for k, v in tree.get("state", {}).items()}}
                for k, entry in out["state"].items():
                    if not isinstance(k, int) or not 0 <= k < len(self.params):
                        raise self._refuse(f"its optimizer state names parameter {k!r}")
                    name = self.params[k]
                    shape = self._shape(name)
                    for key, v in entry.items():
                        if (
                            isinstance(v, torch.Tensor)
                            and v.ndim
                            and list(v.shape[1:]) == shape[1:]
                        ):
                            sharded.append((k, key, name, shape))
                            entry[key] = torch.empty(self._mine(shape), dtype=v.dtype)
            for k, key, name, shape in sharded:
                src = tree.get("state", {}).get(k, {}).get(key)
                self._cut(out["state"][k][key], src, f"optimizer state {key} of {name}", shape, r)
        return out

    def _loop(self) -> Any:
        base: Any = None
        flat: list[tuple[list[str], list[list[int]], torch.Tensor | None]] = []
        for r, tree in self._writers("loop"):
            if r == 0:
                base = tree
                for row in self.loop_layout:
                    try:
                        where, names = [str(k) for k in row["path"]], list(row["params"])
                    except (KeyError, TypeError):
                        raise self._refuse(f"its loop_layout has a malformed row {row!r}") from None
                    shapes = [self._shape(n) for n in names]
                    v = _at(tree, where)
                    new = None
                    if v is not None:
                        if not isinstance(v, torch.Tensor) or v.ndim != 1:
                            raise self._refuse(f"{'.'.join(where)} is not a flat vector")
                        size = flat_size(shapes, self.current[1], self.current[0])
                        new = torch.empty(size, dtype=v.dtype)
                    flat.append((where, shapes, new))
            else:
                skip = [where for where, _, _ in flat]
                diff = first_difference(base, tree, [], skip)
                if diff is not None:
                    raise self._refuse(
                        f"{self.owner(diff)} keeps per-process state ({'.'.join(diff)}) that "
                        "cannot be cut for another number of processes"
                    )
            for where, shapes, new in flat:
                src = _at(tree, where)
                if new is None:
                    if src is not None:
                        raise self._refuse(f"{'.'.join(where)} is set on process {r} only")
                    continue
                want = flat_size(shapes, self.written, r)
                if not isinstance(src, torch.Tensor) or src.shape != (want,):
                    raise self._refuse(
                        f"process {r}'s {'.'.join(where)} does not hold {want} entries"
                    )
                copy_flat_rows(new, src, shapes, (r, self.written), self.current)
        for where, _, new in flat:
            _put(base, where, new)
        return base


def loop_layout(loop: dict[str, Any], model: torch.nn.Module) -> list[dict[str, Any]]:
    """The manifest's ``loop_layout``: each loop-state tensor that holds shards (its key path
    and the parameters it is a flat vector over), from the loop states' ``sharded_state``
    (:meth:`polymnesia.training.plugins.TrainingPlugin.sharded_state`)."""
    rows = []
    for key, obj in loop.items():
        get = getattr(obj, "sharded_state", None)
        for sub, names in (get(model) if get is not None else {}).items():
            rows.append({"path": [key, *sub], "params": list(names)})
    return rows


def owner(loop: dict[str, Any], where: list[str]) -> str:
    """Who keeps the loop state at ``where`` (a plugin, by name), for a message."""
    describe = getattr(loop.get(where[0]), "describe", None)
    return describe(where[1:]) if describe is not None else f"loop state '{where[0]}'"


def processes(n: Any) -> str:
    """``1 process``, ``N processes``."""
    return f"{n} process" if n == 1 else f"{n} processes"


def _at(tree: Any, where: list[str]) -> Any:
    """The value at ``where`` (keys) in nested dicts, None where there is none."""
    for key in where:
        if not isinstance(tree, dict) or key not in tree:
            return None
        tree = tree[key]
    return tree


def _put(tree: Any, where: list[str], value: Any) -> None:
    for key in where[:-1]:
        tree = tree[key]
    tree[where[-1]] = value


def _same_leaf(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        return bool(torch.equal(a, b)) or (
            a.is_floating_point() and bool(((a == b) | (a.isnan() & b.isnan())).all())
        )
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.shape == b.shape
            and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
        )
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def first_difference(a: Any, b: Any, where: list[str], skip: list[list[str]]) -> list[str] | None:
    """The first path (keys, list indices) where ``a`` and ``b`` differ, leaving out ``skip``."""
    if where in skip:
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                return [*where, str(key)]
            found = first_difference(a[key], b[key], [*where, str(key)], skip)
            if found is not None:
                return found
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if type(a) is not type(b) or len(a) != len(b):
            return where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, [*where, str(i)], skip)
            if found is not None:
                return found
        return None
    return None if _same_leaf(a, b) else where
