# Lesson: a convolutional network (conv + BatchNorm + ReLU + max-pool, twice) reads the 8x8 digits.
#
# Run it:  build/bin/tensorscope-cli run samples/cnn_digits.py
#          build/bin/tensorscope samples/cnn_digits.py      (the graph view shows what a conv is made of)
#
# What to look at:
# * conv2d is not a primitive. It becomes movement ops that lay the 3x3 neighbourhood of every pixel
#   side by side (pad, then expand/reshape/shrink windows: no copy, only index arithmetic), a
#   multiply with the weights and a sum over (input channel, ky, kx): a matmul in disguise. In the
#   debugger the whole thing is one kernel whose loads compute the window indices.
# * max_pool2d is the same window trick with a max instead of a sum.
# * BatchNorm in training mode reduces over the batch (mean, then variance): each reduce ends a
#   kernel, because its result is broadcast back over the input ("reduce output is expanded").
#
# Expected result: test accuracy about 0.98 (at least 0.97).
import time

import numpy as np

from tensorscope import Tensor, datasets, nn
from tensorscope.nn import optim

Tensor.manual_seed(0)
rng = np.random.default_rng(0)

# The same data and split as mlp_digits.py, but kept as images: (N, channels=1, height=8, width=8).
X, Y = datasets.digits()
order = np.random.default_rng(42).permutation(len(X))
X, Y = X[order].reshape(-1, 1, 8, 8), Y[order]
n_train = int(len(X) * 0.8)
X_train, Y_train, X_test, Y_test = X[:n_train], Y[:n_train], X[n_train:], Y[n_train:]


class CNN:
    """(N, 1, 8, 8) -> conv 3x3 (8 channels) -> BN -> ReLU -> max-pool 2x2 -> (N, 8, 4, 4)
                    -> conv 3x3 (16 channels) -> BN -> ReLU -> max-pool 2x2 -> (N, 16, 2, 2)
                    -> flatten (N, 64) -> linear -> 10 logits."""

    def __init__(self):
        # padding=1 keeps 8x8 -> 8x8; the pooling halves it. The convs need no bias: BatchNorm's
        # mean subtraction would cancel it (BN's own bias takes its place).
        self.conv1, self.bn1 = nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 2 * 2, 10)

    def __call__(self, x: Tensor) -> Tensor:
        x = self.bn1(self.conv1(x)).relu().max_pool2d(kernel_size=(2, 2))
        x = self.bn2(self.conv2(x)).relu().max_pool2d(kernel_size=(2, 2))
        return self.fc(x.flatten(1))


model = CNN()
# get_parameters returns the weights AND BatchNorm's running statistics (requires_grad=False). The
# optimizer trains the first and realizes the second with every step, so the running statistics
# (updated lazily by every training forward pass) never pile up as an ever-growing graph.
opt = optim.SGD(nn.get_parameters(model), lr=0.05, momentum=0.9)

BATCH, STEPS = 64, 300
Tensor.training = True   # BatchNorm normalizes with batch statistics and updates its running ones
start = time.perf_counter()
for step in range(STEPS):
    idx = rng.integers(0, n_train, BATCH)
    loss = model(Tensor(X_train[idx])).sparse_categorical_crossentropy(Tensor(Y_train[idx]), label_smoothing=0.1)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 50 == 0 or step == STEPS - 1:
        print(f"step {step:4d}  loss {loss.item():.4f}")
print(f"trained {STEPS} steps in {time.perf_counter() - start:.2f} s")

# Evaluation mode: BatchNorm now uses the running mean/variance gathered during training, so a
# prediction depends on its own image only, not on the rest of the batch.
Tensor.training = False
print("bn1 running mean:", np.round(model.bn1.running_mean.numpy(), 3))
logits = model(Tensor(X_test)).numpy()
accuracy = (logits.argmax(axis=1) == Y_test).mean()
print(f"test accuracy: {accuracy:.3f}")
