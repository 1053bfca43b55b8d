"""Base class for every typed config section."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

#: ``Field(json_schema_extra=NOT_FINGERPRINTED)`` marks a setting that does not change what a
#: stage produces (a report's headline metric): it is left out of stage fingerprints
NOT_FINGERPRINTED: dict[str, Any] = {"fingerprint": False}


class StrictModel(BaseModel):
    """A config section: unknown keys are errors, values are validated on load.

    Field descriptions double as documentation (``polymnesia ls``, docs).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())
