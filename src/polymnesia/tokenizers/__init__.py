"""polymnesia.tokenizers: BPE training, vocabulary merge and expansion, chat examples, fertility.

Aggarwal et al. 2024 section 3 (vocabulary expansion) and appendix C (ChatML prompts). Each module
is
imported by name (``polymnesia.tokenizers.bpe``, ``.merge``, ``.expand``, ``.chat``,
``.fertility``): the package itself imports none, so reading a tokenizer section
(:mod:`polymnesia.tokenizers.config`) loads neither transformers nor tokenizers.
"""
