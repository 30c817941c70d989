# Lesson: a tiny decoder-only transformer (the GPT architecture, 2 layers) learns to reverse digit strings.
#
# Run it:  build/bin/tensorscope-cli run samples/transformer_tiny.py     (about a minute on a laptop CPU)
#          build/bin/tensorscope samples/transformer_tiny.py             (watch attention decompose in the graph)
#
# The task: read 6 random digits, then a separator, then write the digits in reverse order.
#     input   3 1 4 1 5 9 | 9 5 1 4 1      (what the model sees, one token per position)
#     target              9 5 1 4 1 3      (what it must predict at positions 6..11)
# Each output digit must be copied from a different input position, so the model has to learn
# *where to look*: exactly the job of attention.
#
# The pieces, each a composition of primitive ops you can find in the graph view:
# * Embedding: a row lookup in a (vocab, dim) table, for the token and for its position.
# * LayerNorm: mean and variance over the feature axis (two reduces), then scale and shift.
# * Causal self-attention: scores = q @ k^T / sqrt(head_dim), future positions masked to -inf,
#   softmax (max, subtract, exp, sum, divide), then @ v. scaled_dot_product_attention(is_causal=True)
#   builds all of that: two matmuls (reshape + expand + mul + sum) around a softmax.
# * MLP: Linear -> GELU -> Linear, applied at every position.
# Every sub-layer is added back to its input (a residual connection), which keeps gradients healthy.
#
# Expected result: token accuracy 1.00 (at least 0.95) on new strings, decoded greedily.
import math
import time

import numpy as np

from tensorscope import Tensor, nn
from tensorscope.nn import optim

L = 6                  # digits per string
SEP = 10               # the separator token; tokens 0..9 are the digits
VOCAB, T = 11, 2 * L   # the model sees L digits + separator + L-1 answer digits = 2L positions
DIM, HEADS, LAYERS = 32, 4, 2

Tensor.manual_seed(0)
rng = np.random.default_rng(0)


def make_batch(rng, n):
    """n random strings: (inputs (n, 2L) int32, targets (n, L) int32)."""
    x = rng.integers(0, 10, size=(n, L))
    y = x[:, ::-1]
    inputs = np.concatenate([x, np.full((n, 1), SEP), y[:, :-1]], axis=1)   # teacher forcing
    return inputs.astype(np.int32), np.ascontiguousarray(y, dtype=np.int32)


class Block:
    """Pre-LayerNorm transformer block: x + attention(ln(x)), then x + mlp(ln(x))."""

    def __init__(self):
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM)   # queries, keys and values in one matmul
        self.proj = nn.Linear(DIM, DIM)
        self.fc1, self.fc2 = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)

    def attention(self, x: Tensor) -> Tensor:
        B, S, _ = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        # (B, S, DIM) -> (B, HEADS, S, DIM/HEADS): each head attends on its own slice of the features.
        q, k, v = [t.reshape(B, S, HEADS, DIM // HEADS).transpose(1, 2) for t in (q, k, v)]
        # is_causal=True: position i only sees positions <= i (the upper triangle of scores is -inf),
        # so the model cannot cheat by looking at the answer digits it has to predict.
        out = q.scaled_dot_product_attention(k, v, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(B, S, DIM))

    def __call__(self, x: Tensor) -> Tensor:
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(self.fc1(self.ln2(x)).gelu())


class TinyTransformer:
    def __init__(self):
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(T, DIM)   # attention alone has no notion of order: learn one vector per position
        self.blocks = [Block() for _ in range(LAYERS)]
        self.ln = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)
        self.positions = np.arange(T, dtype=np.int32)

    def __call__(self, idx: Tensor) -> Tensor:
        """idx (B, S) int32 -> logits (B, S, VOCAB): at every position, the next token's scores."""
        x = self.tok(idx) + self.pos(Tensor(self.positions[:idx.shape[1]]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


model = TinyTransformer()
params = nn.get_parameters(model)
print(f"{sum(p.numel() for p in params)} parameters")
opt = optim.Adam(params, lr=3e-3)

BATCH, STEPS = 32, 100
start = time.perf_counter()
for step in range(STEPS):
    inputs, targets = make_batch(rng, BATCH)
    logits = model(Tensor(inputs))
    # Only positions L..2L-1 (the separator and the answer digits) predict something to score.
    loss = logits[:, L:].sparse_categorical_crossentropy(Tensor(targets))
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 20 == 0 or step == STEPS - 1:
        print(f"step {step:4d}  loss {loss.item():.4f}  ({time.perf_counter() - start:.1f} s)")
print(f"trained {STEPS} steps in {time.perf_counter() - start:.2f} s  (chance level: loss {math.log(10):.2f})")

# Greedy decoding on strings never seen in training: write one digit at a time, feed it back in.
# The sequence always has the full length 2L; positions not written yet hold a placeholder. That is
# safe because of the causal mask (a position never sees the ones after it), and it keeps every
# shape fixed, so all L passes reuse the same compiled kernels.
inputs, targets = make_batch(np.random.default_rng(1234), 500)
seq = inputs.copy()
seq[:, L + 1:] = 0
for j in range(L):
    logits = model(Tensor(seq)).numpy()
    digit = logits[:, L + j].argmax(axis=-1)
    if j + 1 < L:
        seq[:, L + 1 + j] = digit
    targets_hat = digit if j == 0 else np.column_stack([targets_hat, digit])
accuracy = (targets_hat == targets).mean()
print("example:", " ".join(map(str, inputs[0, :L])), "->", " ".join(map(str, targets_hat[0])))
print(f"token accuracy: {accuracy:.3f}   (whole strings right: {(targets_hat == targets).all(axis=1).mean():.3f})")
