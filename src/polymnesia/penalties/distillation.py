"""LwF's distillation term (Li & Hoiem 2017): ``T^2 KL(softmax(z_0/T) || softmax(z/T))``
over whole logits (:func:`distillation_loss`) or over chunks of positions made from final
hidden states, with the cross-entropy of the same chunk (:func:`distillation_rows`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def distillation_loss(
    student: torch.Tensor,
    teacher: torch.Tensor,
    temperature: float,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """``T^2 * KL(softmax(teacher/T) || softmax(student/T))`` summed over classes, mean over
    examples (the rows of ``(B, C)`` logits) or over the positions where ``mask`` is 1
    (``(B, L, C)`` logits). ``T^2`` keeps the gradient's scale independent of ``T`` (Hinton
    et al. 2015), as LwF does."""
    t = temperature
    log_p = F.log_softmax(student.float() / t, dim=-1)
    log_q = F.log_softmax(teacher.float() / t, dim=-1)
    kl = (log_q.exp() * (log_q - log_p)).sum(-1)
    if mask is not None and kl.ndim == mask.ndim:
        m = mask.to(kl.dtype)
        return t * t * (kl * m).sum() / m.sum().clamp_min(1)
    return t * t * kl.mean()


def distillation_rows(
    student: torch.Tensor,
    teacher: torch.Tensor,
    temperature: float,
    weights: torch.Tensor | float | None = 1.0,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per row of float32 ``(n, C)`` logits, ``kl_i = T^2 * KL(softmax(teacher_i/T) ||
    softmax(student_i/T))`` (``(n,)``: the rows of :func:`distillation_loss` before their
    (masked) mean), and unless ``weights`` is None the gradient of ``sum_i weights_i * kl_i``
    with respect to ``student``, ``weights_i * T * (softmax(student_i/T) -
    softmax(teacher_i/T))`` (``(n, C)``; ``weights``: a number or ``(n,)``). The inputs are
    not changed.

    Written for few passes over the ``(n, C)`` logits (two exponentials, no log-softmax
    tensors): with ``a = (z - max z)/T``, ``b = (y - max y)/T`` and their sums of
    exponentials ``s_a``, ``s_b``, ``kl / T^2 = sum(e^b (b - a)) / s_b - log s_b + log s_a``.
    """
    t = temperature
    a = torch.add(student.amax(-1, keepdim=True) / -t, student, alpha=1 / t)
    b = torch.add(teacher.amax(-1, keepdim=True) / -t, teacher, alpha=1 / t)
    eb = b.exp()
    sb = eb.sum(-1)
    dot = torch.linalg.vecdot(eb, b.sub_(a))
    ea = a.exp_()
    sa = ea.sum(-1)
    kl = (dot / sb - sb.log() + sa.log()) * (t * t)
    if weights is None:
        return kl, None
    # weights * T * (e^a / s_a - e^b / s_b), row by row
    w = weights[:, None] if isinstance(weights, torch.Tensor) and weights.ndim else weights
    grad = ea.mul_(w * t / sa[:, None]).addcmul_(eb, w * -t / sb[:, None])
    return kl, grad
