"""The special tokens of polymnesia's tokenizers and the ChatML template that uses them."""

from __future__ import annotations

UNK, BOS, EOS, PAD = "<unk>", "<s>", "</s>", "<pad>"
IM_START, IM_END = "<|im_start|>", "<|im_end|>"

#: Special tokens in id order: ``SPECIAL_TOKENS[i]`` has id ``i``.
SPECIAL_TOKENS: tuple[str, ...] = (UNK, BOS, EOS, PAD, IM_START, IM_END)

#: Jinja template for ``tokenizer.apply_chat_template``; same text as
#: :func:`polymnesia.tokenizers.chat.render_chatml`.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
