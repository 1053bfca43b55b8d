"""Built-in stage kinds; importing this package registers every module in it (``polymnesia ls
stages``).
"""

from polymnesia.registry_imports import import_submodules

import_submodules(__name__)
