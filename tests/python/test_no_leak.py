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


class CNN:  # BatchNorm's running statistics are lazy assigns, realized with the step
    def __init__(self, dropout=0.1):
        self.conv, self.bn, self.fc = nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.Linear(64, 10)
        self.p = dropout

    def __call__(self, x):
        return self.fc(self.bn(self.conv(x.reshape(-1, 1, 8, 8))).relu().max_pool2d().flatten(1).dropout(self.p))


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


def _trainable(model):
    """PyTorch's idiom: the optimizer gets the parameters that require gradients, not BatchNorm's running
    statistics (buffers in PyTorch, so model.parameters() leaves them out)."""
    return [p for p in nn.get_parameters(model) if p.requires_grad]


@pytest.mark.parametrize("model_cls,opt_name,kwargs,params", [
    (MLP, "SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4), nn.get_parameters),
    (MLP, "Adam", dict(lr=0.01), nn.get_parameters),
    (CNN, "AdamW", dict(lr=0.01), nn.get_parameters),
    (CNN, "SGD", dict(lr=0.1), _trainable),  # the running statistics realized with the step all the same
    (Attention, "SGD", dict(lr=0.1), nn.get_parameters),
], ids=["mlp-sgd", "mlp-adam", "cnn-bn-adamw", "cnn-bn-trainable-only", "attention-sgd"])
def test_training_steps_do_not_grow_the_graph(model_cls, opt_name, kwargs, params):
    Tensor.manual_seed(0)
    rng = np.random.default_rng(0)
    model = model_cls()
    opt = getattr(optim, opt_name)(params(model), **kwargs)
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


def test_batchnorm_running_statistics_without_the_optimizer():
    """Running statistics the optimizer is not given are realized with each step's schedule: the same values
    as when it is given them (tinygrad's idiom), one schedule a step either way, no lazy chain left behind."""
    x_np = np.random.default_rng(1).uniform(0, 1, size=(16, 64)).astype(np.float32)
    y_np = np.arange(16, dtype=np.int32) % 10
    stats, schedules = [], []
    Tensor.training = True
    try:
        for params in (nn.get_parameters, _trainable):
            Tensor.manual_seed(0)
            model = CNN(dropout=0)  # no dropout: both runs see the same values
            opt = optim.SGD(params(model), lr=0.1)
            GlobalCounters.reset()
            for _ in range(4):
                opt.zero_grad()
                model(Tensor(x_np)).sparse_categorical_crossentropy(Tensor(y_np)).backward()
                opt.step()
            bn = model.bn
            bn.running_mean.realize(bn.running_var, bn.num_batches_tracked)  # already: no schedule
            schedules.append(GlobalCounters.schedule_count + GlobalCounters.schedule_cache_hits)
            stats.append((bn.running_mean.numpy(), bn.running_var.numpy(), bn.num_batches_tracked.item()))
    finally:
        Tensor.training = False
    for a, b in zip(stats[0], stats[1]):
        np.testing.assert_array_equal(a, b)
    assert stats[1][2] == 4
    assert schedules == [4, 4], schedules
