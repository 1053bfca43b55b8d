"""A model out of the stage cache: which stages of a run folder hold one, the checks before an
export (one line each), and the copy itself, verified against the entry's manifest.

Read from the run folder alone (``run.json``: each stage's kind and cache entry), without
torch, so ``polymnesia export`` answers a wrong stage or destination at once. The copy goes
to a private folder beside the destination and appears under its name complete, with its
card (``README.md``), by one rename; the cache entry is only read (a published entry is never
rewritten).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polymnesia.errors import PolymnesiaError
from polymnesia.hub import hub_offline, hub_reachable
from polymnesia.io import atomic_dir, atomic_write_text, current_umask, sha256_file
from polymnesia.pipeline.integrity import MARKER, check_entry, read_marker

#: the model folder of a stage's cache entry (``pipeline.stage.Artifact.MODEL``)
MODEL_FOLDER = "model"
#: a LoRA step's adapter folder in its entry (``stages.sequential.ADAPTER``), with PEFT's
#: ``adapter_config.json``: exported merged into its base, the adapter beside it
ADAPTER_FOLDER = "adapter"
#: the card's file name in an exported folder (what the Hub shows)
CARD = "README.md"


@dataclass(frozen=True)
class RecordedStage:
    """A stage as the run folder's ``run.json`` records it."""

    name: str
    kind: str
    fingerprint: str
    entry: Path

    @property
    def model(self) -> Path:
        return self.entry / MODEL_FOLDER

    @property
    def holds_model(self) -> bool:
        return (self.model / "config.json").is_file()

    @property
    def adapter(self) -> Path:
        return self.entry / ADAPTER_FOLDER

    @property
    def holds_adapter(self) -> bool:
        """A LoRA adapter without a whole model (exported merged into its base)."""
        return not self.holds_model and (self.adapter / "adapter_config.json").is_file()

    @property
    def exportable(self) -> bool:
        return self.holds_model or self.holds_adapter


def run_record(run_dir: Path) -> dict[str, Any]:
    """``run_dir/run.json`` as a dict; one line when the folder is not a run folder."""
    path = run_dir / "run.json"
    if not run_dir.is_dir():
        raise PolymnesiaError(f"run folder {run_dir} does not exist or is not a folder")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PolymnesiaError(f"{run_dir} is not a polymnesia run folder (no run.json)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise PolymnesiaError(f"{path} is damaged ({type(e).__name__})") from None
    if not isinstance(data, dict) or not isinstance(data.get("stages", {}), dict):
        raise PolymnesiaError(f"{path} is damaged (not a run record)")
    return data


def recorded_stages(run_dir: Path) -> dict[str, RecordedStage]:
    """Every stage ``run.json`` records as finished, by name."""
    out = {}
    for name, info in run_record(run_dir).get("stages", {}).items():
        if isinstance(info, dict) and {"kind", "entry"} <= set(info):
            entry = Path(str(info["entry"]))
            out[name] = RecordedStage(name, str(info["kind"]), str(info.get("fingerprint")), entry)
    return out


def model_stages(stages: dict[str, RecordedStage]) -> list[str]:
    """The names of the stages whose entries hold a model folder."""
    return [name for name, s in stages.items() if s.exportable]


def _accepted(stages: dict[str, RecordedStage]) -> str:
    names = model_stages(stages)
    shown = ", ".join(names[:20]) + (f", ... ({len(names)} in all)" if len(names) > 20 else "")
    return f"stages with a model: {shown}" if names else "this run has no stage with a model yet"


def check_dest(dest: Path) -> None:
    """One line unless ``dest`` is absent or an empty folder."""
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise PolymnesiaError(f"{dest} exists and is not a folder; name a new or empty folder")
    if dest.is_dir() and any(dest.iterdir()):
        raise PolymnesiaError(f"{dest} exists and is not empty; name a new or empty folder")


def check_export(run_dir: Path, stage: str, dest: Path) -> RecordedStage:
    """The stage ``stage`` of ``run_dir`` if it can be exported to ``dest``; else one line
    naming what is wrong and what is accepted."""
    stages = recorded_stages(run_dir)
    if stage not in stages:
        raise PolymnesiaError(f"{run_dir} has no finished stage {stage!r}; {_accepted(stages)}")
    s = stages[stage]
    if not s.exportable:
        raise PolymnesiaError(
            f"stage {stage!r} ({s.kind}) holds no model (its entry has no {MODEL_FOLDER}/ "
            f"or {ADAPTER_FOLDER}/ folder); {_accepted(stages)}"
        )
    state = check_entry(s.entry)
    if not state.usable:
        raise PolymnesiaError(
            f"the cache entry of stage {stage!r} is {state.state}"
            f"{f' ({state.detail})' if state.detail else ''}: {s.entry}; run the run's config "
            "again to rebuild it, then export"
        )
    check_dest(dest)
    return s


def _copy_verified(
    src_root: Path, prefix: str, out_root: Path, manifest: dict[str, Any]
) -> list[Path]:
    """Copy the files under ``src_root`` (the entry's folder ``prefix``) to ``out_root``, each
    checked against the entry's manifest (sha256) where it records one."""
    files = sorted(p for p in src_root.rglob("*") if p.is_file() and p.name != MARKER)
    for src in files:
        rel = src.relative_to(src_root)
        out = out_root / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, out)
        record = manifest.get(f"{prefix}/{rel.as_posix()}")
        if isinstance(record, dict) and record.get("sha256") != sha256_file(out):
            raise PolymnesiaError(
                f"{src} differs from the entry's manifest (sha256); run the run's config "
                "again to rebuild the entry, then export"
            )
    return [f.relative_to(src_root) for f in files]


def copy_model(stage: RecordedStage, dest: Path, card: str) -> list[str]:
    """Copy ``stage``'s model folder to ``dest`` with ``card`` as its ``README.md``; each file
    checked against the entry's manifest (sha256) where it records one. The files copied."""
    manifest = (read_marker(stage.entry) or {}).get("files") or {}
    check_dest(dest)
    with atomic_dir(dest) as tmp:  # an empty ``dest`` is replaced by the finished copy
        files = _copy_verified(stage.model, MODEL_FOLDER, tmp, manifest)
        atomic_write_text(tmp / CARD, card)
        os.chmod(tmp, 0o777 & ~current_umask())
    return [str(p) for p in files] + [CARD]


def write_merged(
    stage: RecordedStage, dest: Path, card: str, save: Callable[[Path], None]
) -> list[str]:
    """An adapter stage's export: ``save(folder)`` writes the merged model there, the entry's
    adapter is copied (verified) to ``adapter/`` beside it, and ``card`` is its README.md."""
    manifest = (read_marker(stage.entry) or {}).get("files") or {}
    check_dest(dest)
    with atomic_dir(dest) as tmp:
        save(tmp)
        _copy_verified(stage.adapter, ADAPTER_FOLDER, tmp / ADAPTER_FOLDER, manifest)
        atomic_write_text(tmp / CARD, card)
        os.chmod(tmp, 0o777 & ~current_umask())
        files = sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file())
    return files


def check_push(repo: str) -> None:
    """One line unless ``repo`` is a valid Hub repository id and the Hub can be reached."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo)
    except HFValidationError:
        raise PolymnesiaError(
            f"--push-to-hub {repo!r} is not a Hub repository id; give NAME or OWNER/NAME "
            "(letters, digits, '-', '_', '.')"
        ) from None
    if hub_offline(datasets=False):
        raise PolymnesiaError(
            "--push-to-hub needs the Hugging Face Hub, and HF_HUB_OFFLINE is set; unset it on a "
            "machine with internet, or export without --push-to-hub and upload the folder later"
        )
    if not hub_reachable():
        raise PolymnesiaError(
            "--push-to-hub: the Hugging Face Hub cannot be reached from this machine; export "
            "without --push-to-hub and upload the folder from a machine with internet"
        )


def push_folder(folder: Path, repo: str, *, private: bool, message: str) -> str:
    """Upload ``folder`` (an export, with its card) to the Hub model repository ``repo``,
    creating it if needed; its URL. A refusal by the Hub (no token, no rights) is one line."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi()
    try:
        url = api.create_repo(repo, repo_type="model", private=private, exist_ok=True)
        api.upload_folder(repo_id=repo, folder_path=str(folder), commit_message=message)
    except HfHubHTTPError as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise PolymnesiaError(
            f"--push-to-hub {repo}: the Hub refused the upload ({first}); log in with "
            f"`hf auth login` or set HF_TOKEN, then push {folder} again"
        ) from None
    return str(url)
