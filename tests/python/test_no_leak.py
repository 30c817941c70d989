# Repeated training steps must not grow the lazy graph: after warm-up, the number of live graph
# nodes (every buffer is a node too) and the number of kernels per step stay the same. A leak here
# would mean each step keeps the previous step's graph alive (a lazy value never realized, or a
# reference cycle through .grad), and long training runs would slow down and run out of memory.
import gc

import numpy as np
import pytest

from tensorscope import GlobalCounters, Tensor, nn
from tensorscope.nn import optim


class MLP:
    def __init__(self):
        self.l1, self.l2 = nn.Linear(64, 32), nn.Linear(32, 10)

    def __call__(self, x):
        return self.l2(self.l1(x).relu())


class CNN:  # BatchNorm's running statistics are lazy assigns realized by the optimizer
    def __init__(self):
        self.conv, self.bn, self.fc = nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Linear(64, 10)

    def __call__(self, x):
        return self.fc(self.bn(self.conv(x.reshape(-1, 1, 8, 8))).relu().max_pool2d().flatten(1).dropout(0.1))


class Attention:
    def __init__(self):
        self.emb, self.qkv, self.ln, self.out = nn.Embedding(10, 16), nn.Linear(16, 48), nn.LayerNorm(16), nn.Linear(16, 10)

    def __call__(self, x):
        h = self.emb((x[:, :8] * 9).int())
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        return self.out(self.ln(h + q.scaled_dot_product_attention(k, v, is_causal=True))).mean(axis=1)


def _live_nodes():
    gc.collect()
    return GlobalCounters.live_graph_nodes()


@pytest.mark.parametrize("model_cls,opt_name,kwargs", [
    (MLP, "SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)),
    (MLP, "Adam", dict(lr=0.01)),
    (CNN, "AdamW", dict(lr=0.01)),
    (Attention, "SGD", dict(lr=0.1)),
], ids=["mlp-sgd", "mlp-adam", "cnn-bn-adamw", "attention-sgd"])
def test_training_steps_do_not_grow_the_graph(model_cls, opt_name, kwargs):
    Tensor.manual_seed(0)
    rng = np.random.default_rng(0)
    model = model_cls()
    opt = getattr(optim, opt_name)(nn.get_parameters(model), **kwargs)
    x_np = rng.uniform(0, 1, size=(16, 64)).astype(np.float32)
    y_np = rng.integers(0, 10, 16).astype(np.int32)

    def step():
        loss = model(Tensor(x_np)).sparse_categorical_crossentropy(Tensor(y_np))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    Tensor.training = True
    try:
        for _ in range(3):  # warm-up: compile caches, optimizer state, first lazy values
            step()
        baseline = _live_nodes()
        kernels = []
        for _ in range(15):
            GlobalCounters.reset()
            step()
            kernels.append(GlobalCounters.kernel_count)
        after = _live_nodes()
    finally:
        Tensor.training = False
    assert after <= baseline, f"live graph nodes grew from {baseline} to {after} over 15 steps"
    assert len(set(kernels)) == 1, f"kernels per step changed: {kernels}"


def test_inference_and_state_dict_reads_do_not_leak():
    Tensor.manual_seed(0)
    model = MLP()
    x = np.ones((4, 64), np.float32)
    for _ in range(2):
        model(Tensor(x)).numpy()
        [v.numpy() for v in nn.get_state_dict(model).values()]
    baseline = _live_nodes()
    for _ in range(10):
        model(Tensor(x)).numpy()
        [v.numpy() for v in nn.get_state_dict(model).values()]
    assert _live_nodes() <= baseline
