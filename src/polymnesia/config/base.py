"""Base class for every typed config section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A config section: unknown keys are errors, values are validated on load.

    Field descriptions double as documentation (``polymnesia ls``, docs).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())
