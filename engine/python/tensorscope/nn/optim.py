"""Optimizers with tinygrad's semantics (``tinygrad.nn.optim``): SGD and Adam.

``zero_grad()`` drops the gradients (``p.grad = None``); ``backward()`` then builds fresh ones.
``step()`` writes the updated values into the parameters with ``assign`` and realizes them (and the
optimizer state) at once, so each step runs a fixed set of kernels and the graph does not grow from
step to step. All math is lazy Tensor ops: the update of each parameter fuses into few kernels and
never goes through NumPy.
"""
from __future__ import annotations

import numpy as np

from tensorscope import Tensor


def _zeros_like(t: Tensor) -> Tensor:
    """A realized float32 buffer of zeros on t's device (optimizer state must be a real buffer to assign to)."""
    return Tensor(np.zeros(t.shape, dtype=np.float32), device=t.device, requires_grad=False)


class Optimizer:
    def __init__(self, params: list[Tensor], lr: float):
        # tinygrad: a parameter whose requires_grad is undecided (None) becomes trainable.
        for p in params:
            if p.requires_grad is None:
                p.requires_grad = True
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise ValueError("optimizer got no parameters with requires_grad=True")
        self.lr = lr

    def zero_grad(self) -> None:
        """Forgets the gradients of all parameters (``p.grad = None``)."""
        for p in self.params:
            p.grad = None

    def _grads(self) -> list[Tensor]:
        missing = [i for i, p in enumerate(self.params) if p.grad is None]
        if missing:
            raise RuntimeError(f"parameters {missing} have no gradient: call backward() before step()")
        return [p.grad for p in self.params]

    @staticmethod
    def _realize(tensors: list[Tensor]) -> None:
        for t in tensors:
            t.realize()


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, Nesterov momentum and weight decay.

    Per parameter p with gradient g (PyTorch's and tinygrad's formulation):
        g = g + weight_decay * p
        b = momentum * b + g                      (b starts at 0; only when momentum != 0)
        g = g + momentum * b if nesterov else b
        p = p - lr * g
    """

    def __init__(self, params: list[Tensor], lr: float = 0.001, momentum: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False):
        super().__init__(params, lr)
        self.momentum, self.wd, self.nesterov = momentum, weight_decay, nesterov
        self.b = [_zeros_like(p) for p in self.params] if momentum else []

    def step(self) -> None:
        for i, (p, g) in enumerate(zip(self.params, self._grads())):
            if self.wd:
                g = g + self.wd * p.detach()
            if self.momentum:
                self.b[i].assign(self.momentum * self.b[i] + g)
                g = g + self.momentum * self.b[i] if self.nesterov else self.b[i]
            p.assign(p.detach() - self.lr * g)
        self._realize(self.b + self.params)


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2015, https://arxiv.org/abs/1412.6980), as tinygrad's and PyTorch's:

        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)

    The powers b1^t and b2^t are kept as 0-d tensors multiplied by b1, b2 each step, so the step
    count never becomes a constant baked into a kernel (which would recompile every step).
    """

    def __init__(self, params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-8):
        super().__init__(params, lr)
        self.b1, self.b2, self.eps = b1, b2, eps
        self.m = [_zeros_like(p) for p in self.params]
        self.v = [_zeros_like(p) for p in self.params]
        device = self.params[0].device
        self.b1_t = Tensor(np.array(1.0, dtype=np.float32), device=device, requires_grad=False)
        self.b2_t = Tensor(np.array(1.0, dtype=np.float32), device=device, requires_grad=False)

    def step(self) -> None:
        self.b1_t.assign(self.b1_t * self.b1).realize()
        self.b2_t.assign(self.b2_t * self.b2).realize()
        for p, g, m, v in zip(self.params, self._grads(), self.m, self.v):
            m.assign(self.b1 * m + (1.0 - self.b1) * g)
            v.assign(self.b2 * v + (1.0 - self.b2) * (g * g))
            m_hat = m / (1.0 - self.b1_t)
            v_hat = v / (1.0 - self.b2_t)
            p.assign(p.detach() - self.lr * (m_hat / (v_hat.sqrt() + self.eps)))
        self._realize(self.m + self.v + self.params)


__all__ = ["Optimizer", "SGD", "Adam"]
