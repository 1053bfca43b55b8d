"""Instruction data in one place: records and templates, Hub datasets, IFEval-checked
verifiable instructions, the offline two-phase sets (the two-phase CFT paper) and replay mixing.

* :mod:`~polymnesia.instructions.records`: Alpaca-style records, the shared instruction
  templates and Aggarwal et al. 2024's Bible-derived English records;
* :mod:`~polymnesia.instructions.hub`: Hub instruction datasets by field mapping (presets
  for Alpaca, MultiAlpaca, OpenOrca, Aya), read through the one Hub loader;
* :mod:`~polymnesia.instructions.ifeval` and :mod:`~polymnesia.instructions.punkt`:
  verifiable instructions about verses and lm-eval's IFEval checkers, offline;
* :mod:`~polymnesia.instructions.sets`: the two-phase instruction sets with data cards;
* :mod:`~polymnesia.instructions.replay`: English and generative replay mixing (the model
  that answers generative replay runs in the ``replay_data`` stage, not here).

The stages ``instruction_data`` and ``replay_data`` build these sets; this package runs no
model.
"""
