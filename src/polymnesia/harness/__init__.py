"""lm-evaluation-harness through polymnesia: offline Bible tasks, running lm-eval, Score records.

* :mod:`.tasks`: the shipped task table (``poly_genre_LANG``, ``poly_continue_mc_LANG``,
  ``poly_continue_gen_LANG``, ``poly_ifeval_LANG``), their YAML for lm-eval's
  ``TaskManager(include_path=...)``, the ``HARNESS_TASKS`` registry (``polymnesia ls
  tasks``) and :func:`~.tasks.check_tasks`;
* :mod:`.docs`: the tasks' documents, written from the prepared Bible split;
* :mod:`.ifeval`: verifiable instructions about verses, checked by IFEval's checkers;
* :mod:`.punkt`: NLTK's Punkt data offline (IFEval's checkers need it);
* :mod:`.run`: :func:`~.run.run_lm_eval` and :func:`~.run.results_to_scores`.

lm-eval itself is the optional extra ``harness`` (``pip install 'polymnesia[harness]'``);
nothing here imports it at module level, so listing tasks works without it.
"""
