"""Model merging, apart from the training plugins that use it: the tensor maths
(:mod:`polymnesia.merging.maths`: averaging, task arithmetic, a sequential step's merge;
:mod:`polymnesia.merging.ties`: TIES per tensor) and merging Hugging Face model folders one
tensor at a time (:mod:`polymnesia.merging.folders`)."""
