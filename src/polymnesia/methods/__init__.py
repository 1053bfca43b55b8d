"""Training methods that plug into the loop (registered in ``training.plugins.PLUGINS``)."""

from polymnesia.registry_imports import import_submodules

import_submodules(__name__)
