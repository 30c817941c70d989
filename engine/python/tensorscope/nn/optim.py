"""Optimizers with tinygrad's semantics (``tinygrad.nn.optim``) and PyTorch's numbers: SGD, Adam,
AdamW and LAMB.

``zero_grad()`` drops the gradients (``p.grad = None``); ``backward()`` then builds fresh ones.
``step()`` writes the updated values into the parameters with ``assign`` and realizes the
parameters, the optimizer state and the buffers in one schedule, so each step runs a fixed set of
kernels and the graph does not grow from step to step. All math is lazy Tensor ops: the update of
each parameter fuses into few kernels and never goes through NumPy.

The learning rate is kept in a 0-d tensor that the update kernels read (as tinygrad keeps ``lr`` as a
Tensor): setting ``opt.lr`` between steps (a learning-rate schedule) writes the new value into it and
compiles nothing, in eager steps and in ``tensorscope.jit`` replays alike. The other hyperparameters
(momentum, betas, eps, weight decay) are python floats baked into the kernels as constants; changing
them recompiles the update kernels once for each new value.
"""
from __future__ import annotations

import numpy as np

from tensorscope import Tensor, _C


def _zeros_like(t: Tensor) -> Tensor:
    """A realized buffer of zeros of t's shape, float dtype and device (optimizer state starts as a real buffer;
    in the parameter's dtype, as PyTorch keeps it: float32 state assigned to a float16 parameter was an error)."""
    return Tensor(np.zeros(t.shape, dtype=np.float16 if t.dtype == "float16" else np.float32), device=t.device,
                  requires_grad=False)


def _dedup(tensors: list[Tensor]) -> list[Tensor]:
    seen: set[int] = set()
    return [t for t in tensors if not (id(t) in seen or seen.add(id(t)))]


class Optimizer:
    """The base: ``params`` with ``requires_grad`` are trained; the others (BatchNorm's running
    statistics, when the list comes from ``nn.get_parameters(model)``) are buffers that ``step()``
    realizes together with the parameters, as in tinygrad. A Tensor listed twice counts once.

    Raises: ValueError when no Tensor in ``params`` has ``requires_grad=True``.
    """

    def __init__(self, params: list[Tensor], lr: float):
        params = _dedup(list(params))
        self.params = [p for p in params if p.requires_grad]
        self.buffers = [p for p in params if not p.requires_grad]
        if not self.params:
            raise ValueError("optimizer got no parameters with requires_grad=True")
        self._lr_value = float(lr)
        # the tensor the update kernels read: a new lr is written into its buffer (Tensor.copy_from_host)
        self._lr = Tensor(np.array(self._lr_value, dtype=np.float32), device=self.params[0].device,
                          requires_grad=False).realize()

    @property
    def lr(self) -> float:
        """The learning rate (a python float). Assigning it writes the value into the 0-d float32 tensor the
        update kernels read, so a schedule changes no kernel; it takes effect at the next ``step()`` (or jit
        replay). Set it outside a jitted function: inside one, the capture fails (a replay runs no python)."""
        return self._lr_value

    @lr.setter
    def lr(self, value: float) -> None:
        value = float(value)
        self._lr._t.copy_from_numpy(np.array(value, dtype=np.float32))
        self._lr_value = value

    def zero_grad(self) -> None:
        """Forgets the gradients of all parameters (``p.grad = None``)."""
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        """Updates every parameter from its ``.grad`` and realizes parameters, state and buffers together."""
        state = self.schedule_step()
        everything = self.params + state + self.buffers
        everything[0].realize(*everything[1:])

    def schedule_step(self) -> list[Tensor]:
        """Assigns the new (lazy) values to the parameters and the state; returns the state Tensors."""
        raise NotImplementedError

    def _grads(self) -> list[Tensor]:
        missing = [i for i, p in enumerate(self.params) if p.grad is None]
        if missing:
            raise RuntimeError(f"parameters {missing} (shapes {[self.params[i].shape for i in missing]}) have no "
                               "gradient: call backward() on a loss that depends on them before step()")
        return [p.grad for p in self.params]


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, Nesterov momentum and weight decay.

    Per parameter p with gradient g (PyTorch's ``torch.optim.SGD`` with dampening 0, and tinygrad's):
        g = g + weight_decay * p
        b = momentum * b + g                      (b starts at 0; only when momentum != 0)
        g = g + momentum * b if nesterov else b
        p = p - lr * g
    """

    def __init__(self, params: list[Tensor], lr: float = 0.001, momentum: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False):
        super().__init__(params, lr)
        if nesterov and momentum <= 0:
            raise ValueError("SGD: nesterov momentum needs momentum > 0")
        self.momentum, self.wd, self.nesterov = momentum, weight_decay, nesterov
        self.b = [_zeros_like(p) for p in self.params] if momentum else []

    def schedule_step(self) -> list[Tensor]:
        # the formula above, for every parameter, built by the engine in one call (tensorscope/optim.h: the
        # same ops in the same order as these lines would build them one Python call per op)
        #   if wd: g = g + wd * p.detach()
        #   if momentum: b.assign(momentum * b + g); g = g + momentum * b if nesterov else b
        #   p.assign(p.detach() - lr * g)
        _C.sgd_update([p._t for p in self.params], [g._t for g in self._grads()], [b._t for b in self.b],
                      self._lr._t, float(self.momentum), float(self.wd), bool(self.nesterov))
        return self.b


class LAMB(Optimizer):
    """LAMB (You et al., 2019, https://arxiv.org/abs/1904.00962), and with ``adam=True`` Adam/AdamW,
    as tinygrad's ``LAMB``:

        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        u = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + weight_decay * p
        r = ||p|| / ||u|| (LAMB's trust ratio; 1 for Adam, or when either norm is 0)
        p = p - lr * r * u

    With ``adam=True`` this is exactly ``torch.optim.AdamW``'s decoupled weight decay
    (p ← p - lr·wd·p - lr·adam_update), and ``torch.optim.Adam`` when weight_decay is 0.

    The powers b1^t and b2^t are kept as 0-d tensors multiplied by b1, b2 each step, so the step
    count never becomes a constant baked into a kernel (which would recompile every step).
    """

    def __init__(self, params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6,
                 weight_decay: float = 0.0, adam: bool = False):
        super().__init__(params, lr)
        self.b1, self.b2, self.eps, self.wd, self.adam = b1, b2, eps, weight_decay, adam
        device = self.params[0].device
        self.b1_t = Tensor(np.array(1.0, dtype=np.float32), device=device, requires_grad=False)
        self.b2_t = Tensor(np.array(1.0, dtype=np.float32), device=device, requires_grad=False)
        self.m = [_zeros_like(p) for p in self.params]
        self.v = [_zeros_like(p) for p in self.params]

    def schedule_step(self) -> list[Tensor]:
        # the formula above, for every parameter, built by the engine in one call (tensorscope/optim.h: the
        # same ops in the same order as these lines would build them one Python call per op)
        #   b1_t.assign(b1_t * b1); b2_t.assign(b2_t * b2); c1, c2 = 1.0 - b1_t, 1.0 - b2_t
        #   m.assign(b1 * m + (1.0 - b1) * g); v.assign(b2 * v + (1.0 - b2) * (g * g))
        #   up = (m / c1) / ((v / c2).sqrt() + eps);  if wd: up = up + wd * p.detach()
        #   if not adam: r1, r2 = p.detach().square().sum().sqrt(), up.square().sum().sqrt()
        #                up = up * ((r1 > 0) & (r2 > 0)).where(r1 / r2, 1.0)
        #   p.assign(p.detach() - lr * up)
        _C.lamb_update([p._t for p in self.params], [g._t for g in self._grads()], [m._t for m in self.m],
                       [v._t for v in self.v], self.b1_t._t, self.b2_t._t, self._lr._t, float(self.b1),
                       float(self.b2), float(self.eps), float(self.wd), bool(self.adam))
        return [self.b1_t, self.b2_t] + self.m + self.v


def Adam(params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> LAMB:
    """Adam (Kingma & Ba, 2015, https://arxiv.org/abs/1412.6980) = ``torch.optim.Adam`` without weight decay
    (tinygrad spells it as LAMB with adam=True). torch's ``betas=(b1, b2)`` are ``b1``, ``b2`` here."""
    return LAMB(params, lr, b1, b2, eps, 0.0, adam=True)


def AdamW(params: list[Tensor], lr: float = 0.001, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 0.01) -> LAMB:
    """AdamW (Loshchilov & Hutter, 2019, https://arxiv.org/abs/1711.05101): Adam with decoupled weight decay,
    = ``torch.optim.AdamW`` (same defaults)."""
    return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True)


__all__ = ["Optimizer", "SGD", "LAMB", "Adam", "AdamW"]
