"""The wheel carries the shipped configs (``configs/``) as ``polymnesia/configs/``, so that an
installed polymnesia runs them by name (``polymnesia run quickstart``, ``polymnesia init DIR``;
:mod:`polymnesia.shipped`). Everything else is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithConfigs(build_py):
    def run(self) -> None:
        super().run()
        source = Path(__file__).resolve().parent / "configs"
        target = Path(self.build_lib) / "polymnesia" / "configs"
        for path in sorted(source.rglob("*.yaml")):
            out = target / path.relative_to(source)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, out)


setup(cmdclass={"build_py": BuildWithConfigs})
