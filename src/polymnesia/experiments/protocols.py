"""Importing this module registers every protocol in
:data:`~polymnesia.experiments.base.EXPERIMENTS`: each protocol package's ``protocol`` module,
and with it the stages it builds (torch, transformers). ``EXPERIMENTS`` imports it on its
first lookup; reading a config needs only the protocol's ``config`` module
(:data:`~polymnesia.experiments.base.EXPERIMENT_CONFIGS`)."""

from polymnesia.registry_imports import import_each

import_each("polymnesia.experiments", "protocol")
