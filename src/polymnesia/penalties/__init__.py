"""The maths of the regularisation baselines, apart from the training plugins that use them
(:mod:`polymnesia.methods.regularization`): quadratic penalties towards an anchor and their
exact gradient (:mod:`polymnesia.penalties.quadratic`: L2-SP, EWC), the diagonal and online
Fisher with its file (:mod:`polymnesia.penalties.fisher`), and LwF's distillation loss, whole
or by chunks of positions (:mod:`polymnesia.penalties.distillation`)."""
