"""Fault injection for resume tests: run the polymnesia CLI with a SIGKILL planted by
monkeypatching.

Production code has no fault-injection hooks; this script patches them in:

    python tests/faults.py kill-at-checkpoint=N -- run CONFIG ...   # killed as the loop is about
                                                                      # to write checkpoint N
    python tests/faults.py kill-in-checkpoint=N -- run CONFIG ...   # killed half-way through
                                                                      # writing checkpoint N
    python tests/faults.py kill-at-language=K -- run CONFIG ...     # killed as sequential step K
    starts
    python tests/faults.py term-at-checkpoint=N -- run CONFIG ...   # SIGTERM as the loop is
                                                                      # about to write checkpoint N
    python tests/faults.py fail-stage=NAME -- run CONFIG ...        # stage NAME raises each time
                                                                      # it is built, also in the
                                                                      # children of --executor local
    python tests/faults.py hold-after-checkpoint=N:FILE -- run ...  # once checkpoint N is
                                                                      # written, create FILE and
                                                                      # sleep (while FILE is new),
                                                                      # also in executor children
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any


def _die(sig: int = signal.SIGKILL) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), sig)


def kill_at_checkpoint(step: int, *, mid_write: bool = False, sig: int = signal.SIGKILL) -> None:
    from polymnesia.training import checkpoint, state_io

    real_save, real_tree = checkpoint.save, state_io.save_tree

    def save(acc: Any, ckpt_dir: Any, at: int, *args: Any, **kwargs: Any) -> None:
        if at == step and not mid_write:
            _die(sig)
        if at == step:  # let the RNG and model files land, die on the first state tree

            def tree(folder: Any, stem: str, obj: Any) -> list[str]:
                if not stem.startswith("rng_"):
                    _die()
                return real_tree(folder, stem, obj)

            checkpoint.save_tree = tree  # type: ignore[assignment]
        real_save(acc, ckpt_dir, at, *args, **kwargs)

    checkpoint.save = save  # type: ignore[assignment]


def kill_at_language(index: int) -> None:
    from polymnesia.stages.sequential import SequentialStep

    real_run = SequentialStep.run

    def run(self: Any, ctx: Any) -> Any:
        if ctx.params.order_index == index:
            _die()
        return real_run(self, ctx)

    SequentialStep.run = run  # type: ignore[method-assign]


def fail_stage(name: str) -> None:
    """Building stage ``name`` raises, in this process and in every ``--executor local`` child
    it starts (each runs this script with the same fault)."""
    from polymnesia.cli import run as cli_run
    from polymnesia.pipeline import runner

    real_run_one, real_child = runner._run_one, cli_run._child_command

    def run_one(p: Any, *args: Any, **kwargs: Any) -> Any:
        if p.spec.name == name:
            raise RuntimeError(f"injected fault: stage {name} fails")
        return real_run_one(p, *args, **kwargs)

    def child_command(args: Any) -> Any:
        command = real_child(args)

        def faulty(stages: list[str]) -> list[str]:
            argv = command(stages)
            assert argv[1:3] == ["-m", "polymnesia"], argv
            return [argv[0], os.path.abspath(__file__), f"fail-stage={name}", "--", *argv[3:]]

        return faulty

    runner._run_one = run_one  # type: ignore[assignment]
    cli_run._child_command = child_command  # type: ignore[assignment]


def hold_after_checkpoint(step: int, marker: str) -> None:
    """After the loop writes checkpoint ``step``: if ``marker`` does not exist, create it
    and sleep, so that a test can stop the process (``scancel`` its job) at a known step;
    where it exists (the next attempt), go on. Applies in every executor child too."""
    from polymnesia.cli import run as cli_run
    from polymnesia.training import checkpoint

    real_save, real_child = checkpoint.save, cli_run._child_command

    def save(acc: Any, ckpt_dir: Any, at: int, *args: Any, **kwargs: Any) -> None:
        real_save(acc, ckpt_dir, at, *args, **kwargs)
        if at == step and not os.path.exists(marker):
            with open(marker, "w") as f:
                f.write(str(os.getpid()))
            time.sleep(600)

    def child_command(args: Any) -> Any:
        command = real_child(args)

        def held(stages: list[str]) -> list[str]:
            argv = command(stages)
            assert argv[1:3] == ["-m", "polymnesia"], argv
            fault = f"hold-after-checkpoint={step}:{marker}"
            return [argv[0], os.path.abspath(__file__), fault, "--", *argv[3:]]

        return held

    checkpoint.save = save  # type: ignore[assignment]
    cli_run._child_command = child_command  # type: ignore[assignment]


def main(argv: list[str]) -> int:
    split = argv.index("--")
    for fault in argv[:split]:
        name, value = fault.split("=")
        if name == "kill-at-checkpoint":
            kill_at_checkpoint(int(value))
        elif name == "kill-in-checkpoint":
            kill_at_checkpoint(int(value), mid_write=True)
        elif name == "term-at-checkpoint":
            kill_at_checkpoint(int(value), sig=signal.SIGTERM)
        elif name == "kill-at-language":
            kill_at_language(int(value))
        elif name == "fail-stage":
            fail_stage(value)
        elif name == "hold-after-checkpoint":
            at, marker = value.split(":", 1)
            hold_after_checkpoint(int(at), marker)
        else:
            raise SystemExit(f"unknown fault {name}")
    from polymnesia.cli.main import main as cli

    return cli(argv[split + 1 :])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
