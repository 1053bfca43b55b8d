"""Bridge for the ``!function utils.X`` tags of polymnesia's lm-eval task YAML.

lm-eval imports this file by path; the code lives in :mod:`polymnesia.harness.docs`.
"""

from polymnesia.harness.docs import agg_inst_level_acc, load_docs, process_ifeval

__all__ = ["agg_inst_level_acc", "load_docs", "process_ifeval"]
