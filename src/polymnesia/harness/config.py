"""The lm-evaluation-harness section: lm-eval's own options, declared once.

:class:`HarnessOptions` is how lm-eval runs (few-shot count, limit, batch
size, generation cap, offline documents); the ``evaluate_harness`` stage's
parameters extend it, and every protocol that runs lm-eval embeds it:
:class:`HarnessConfig` (``active_forgetting``'s ``evaluation.harness``: the
options and a task list) or ``two_phase``'s ``evaluation.harness`` (the options
with its English and multilingual task lists). The defaults are lm-eval's: the
task's own few-shot count and generation cap, every document.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from polymnesia.config.base import StrictModel
from polymnesia.harness.tasks import check_tasks
from polymnesia.hub import hub_offline


class HarnessOptions(StrictModel):
    """How lm-evaluation-harness runs its tasks (lm-eval's options)."""

    num_fewshot: int | None = Field(
        None,
        ge=0,
        description="few-shot examples (null: the task's own; the two-phase CFT paper: 0)",
    )
    limit: int | float | None = Field(
        None, gt=0, description="documents per task (lm-eval --limit; null: all)"
    )
    batch_size: int | str = Field(8, description="lm-eval's batch size: an integer or 'auto'")
    docs_per_task: int = Field(
        100, gt=0, description="offline poly_* tasks: test documents written per task"
    )
    max_gen_toks: int | None = Field(
        None, gt=0, description="cap on generated tokens (null: the task's own)"
    )
    offline: bool | None = Field(
        None, description="only polymnesia's poly_* tasks (null: follow HF_HUB_OFFLINE)"
    )

    @model_validator(mode="after")
    def _batch(self) -> HarnessOptions:
        if isinstance(self.batch_size, int) and self.batch_size < 1:
            raise ValueError(f"batch_size must be 1 or more, or 'auto', got {self.batch_size}")
        if isinstance(self.batch_size, str) and not self.batch_size.startswith("auto"):
            raise ValueError(f"batch_size must be an integer or 'auto', got {self.batch_size!r}")
        return self

    def is_offline(self) -> bool:
        return hub_offline() if self.offline is None else self.offline

    def options(self) -> dict[str, Any]:
        """These options as keyword arguments (of the ``evaluate_harness`` stage's parameters)."""
        return {k: getattr(self, k) for k in HarnessOptions.model_fields}


class HarnessConfig(HarnessOptions):
    """Downstream tasks through lm-evaluation-harness: the tasks and how they run.

    Offline (``offline: true``, or unset with ``HF_HUB_OFFLINE`` set) only
    polymnesia's ``poly_*`` tasks run; online any lm-eval task name passes through.
    """

    tasks: list[str] = Field(
        min_length=1, description="lm-eval task or tag names (polymnesia ls tasks)"
    )

    @field_validator("tasks")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) < len(v):
            raise ValueError(f"a task is listed twice in harness.tasks: {v}")
        return v

    @model_validator(mode="after")
    def _tasks(self) -> HarnessConfig:
        check_tasks(self.tasks, self.is_offline(), verify_online=False)
        return self
