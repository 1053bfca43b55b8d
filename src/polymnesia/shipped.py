"""The configs polymnesia ships, found by name: ``polymnesia run quickstart`` runs
``configs/quickstart.yaml`` from an installed wheel (which carries them as
``polymnesia/configs/``) or from a source checkout (its ``configs/`` folder), and
``polymnesia init DIR`` copies them out to edit."""

from __future__ import annotations

import shutil
from pathlib import Path

from polymnesia.errors import ConfigError

PACKAGE = Path(__file__).resolve().parent
#: a wheel's copy of the configs, then a source checkout's (an editable install)
PLACES = (PACKAGE / "configs", PACKAGE.parent.parent / "configs")


def shipped_dir() -> Path | None:
    """The folder of the shipped configs (None where this installation has none)."""
    return next((p for p in PLACES if (p / "quickstart.yaml").is_file()), None)


def shipped_names() -> list[str]:
    """The shipped configs by name: ``quickstart``, ``two_phase``, ``gpu/lifelong``, ..."""
    root = shipped_dir()
    if root is None:
        return []
    return sorted(p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.yaml"))


def resolve(config: str) -> str:
    """``config`` as given where it names a file (or looks like a path: it has a suffix or
    a folder that exists); else the shipped config of that name, or one line listing them."""
    p = Path(config)
    try:
        if p.exists() or p.suffix or (len(p.parts) > 1 and Path(*p.parts[:-1]).is_dir()):
            return config
    except OSError:  # a name the file system refuses (an override given as a path?)
        return config  # load_yaml says so in one line
    root = shipped_dir()
    if root is not None and (root / f"{config}.yaml").is_file():
        return str(root / f"{config}.yaml")
    names = shipped_names()
    raise ConfigError(
        f"config file not found: {config}; name a YAML file, or a shipped config: "
        + (", ".join(names) if names else "(none in this installation)")
        + " (`polymnesia init DIR` copies them out to edit)"
    )


def copy_out(dest: Path) -> list[Path]:
    """Copy every shipped config into ``dest`` (``dest/quickstart.yaml``,
    ``dest/gpu/lifelong.yaml``, ...), refused in one line when ``dest`` holds files."""
    root = shipped_dir()
    if root is None:
        raise ConfigError("this installation ships no configs (no polymnesia/configs folder)")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ConfigError(f"{dest} exists and is not an empty folder; name a new folder")
    out = []
    for src in sorted(root.rglob("*.yaml")):
        target = dest / src.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
        out.append(target)
    return out
