# Lesson: train a small neural network (a multilayer perceptron) to read handwritten digits.
#
# Run it:  build/bin/tensorscope-cli run samples/mlp_digits.py     (a few seconds on a laptop CPU)
#          DEBUG=1 build/bin/tensorscope-cli run samples/mlp_digits.py   to see every kernel it runs
#
# Every training step is one lazy graph: forward pass, loss, backward pass and optimizer update.
# The engine cuts it into a handful of fused kernels; from the second step on they come from the
# compile cache, so a step costs only the kernel launches.
import time

import numpy as np

from tensorscope import Tensor, datasets, nn
from tensorscope.nn import optim

Tensor.manual_seed(0)            # makes the weight initialization reproducible
rng = np.random.default_rng(0)   # ... and the order of the minibatches

# 1797 images of 8x8 pixels, flattened to 64 values in [0, 1]; labels 0..9.
X, Y = datasets.digits()
# The file is grouped by the people who wrote the digits. Taking its last 20% as the test set would
# test on writers never seen in training (about 91% accuracy for this model), so we shuffle once with
# a fixed seed and then hold out the last 20%: the same split on every run.
order = np.random.default_rng(42).permutation(len(X))
X, Y = X[order], Y[order]
n_train = int(len(X) * 0.8)
X_train, Y_train, X_test, Y_test = X[:n_train], Y[:n_train], X[n_train:], Y[n_train:]


class MLP:
    """64 inputs -> 128 hidden units (ReLU) -> 10 logits, one per digit."""

    def __init__(self):
        self.l1 = nn.Linear(64, 128)
        self.l2 = nn.Linear(128, 10)

    def __call__(self, x: Tensor) -> Tensor:
        return self.l2(self.l1(x).relu())


model = MLP()
# get_parameters finds the four Tensors (two weights, two biases) by walking the model's attributes.
opt = optim.SGD(nn.get_parameters(model), lr=0.2, momentum=0.9)

BATCH, STEPS = 128, 500
start = time.perf_counter()
for step in range(STEPS):
    # A random minibatch: the images become an input buffer; the labels an int32 tensor.
    idx = rng.integers(0, n_train, BATCH)
    x, y = Tensor(X_train[idx]), Tensor(Y_train[idx])

    # Forward: logits (128, 10), then softmax cross-entropy against the labels (class axis last).
    loss = model(x).sparse_categorical_crossentropy(y)

    # Backward builds the gradient graph (lazy: nothing has run yet).
    opt.zero_grad()
    loss.backward()
    if step % 100 == 0 or step == STEPS - 1:
        # Read the loss before step(): step() writes the new weights into the same buffers the
        # lazy loss still refers to, so reading it afterwards would evaluate it with the new weights.
        print(f"step {step:4d}  loss {loss.item():.4f}")
    # step() assigns the updated weights and realizes them: this is where the kernels run.
    opt.step()
print(f"trained {STEPS} steps in {time.perf_counter() - start:.2f} s")

# Evaluate on images the model never saw. argmax over the 10 logits is the predicted digit.
logits = model(Tensor(X_test)).numpy()
accuracy = (logits.argmax(axis=1) == Y_test).mean()
print(f"test accuracy: {accuracy:.3f}")
