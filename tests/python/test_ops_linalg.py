# Linear algebra against PyTorch: matmul/dot/@ over 1-D, 2-D and batched operands with broadcast batch dims and
# zero-size dims, linear with tinygrad's (in, out) weight, einsum (explicit/implicit output, spaces, repeated
# indices, '...', operands as varargs or a list); error types.
import numpy as np
import pytest
import torch

from ops_helper import check, check_raises, devices
from tensorscope import Tensor

# float32 sums of k products in a different order than torch's BLAS: atol 1e-5 for the forward pass
MATMUL = [((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 5)), ((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)),
          ((2, 1, 3, 4), (5, 4, 2)), ((0, 4), (4, 3)), ((3, 0), (0, 2)), ((2, 3, 4), (2, 4, 1))]


@devices
@pytest.mark.parametrize("shapes", MATMUL, ids=str)
@pytest.mark.parametrize("form", ["matmul", "operator", "dot", "static_dot"])
def test_matmul(shapes, form, dev):
    fn = {"matmul": lambda a, b: a.matmul(b), "operator": lambda a, b: a @ b, "dot": lambda a, b: a.dot(b),
          "static_dot": lambda a, b: Tensor.dot(a, b)}[form]
    check(list(shapes), torch.matmul, fn if form != "static_dot" else fn, dev=dev, atol=1e-5)


@devices
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("xshape", [(4,), (3, 4), (2, 3, 4)], ids=str)
def test_linear(xshape, bias, dev):
    shapes = [xshape, (4, 5)] + ([(5,)] if bias else [])
    check(shapes, lambda x, w, *b: x @ w + (b[0] if b else 0), lambda x, w, *b: x.linear(w, b[0] if b else None), dev=dev, atol=1e-5)


EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij, jk -> ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("i,i->", [(5,), (5,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iji->j", [(3, 5, 3)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,jk", [(2, 2, 3, 4), (4, 5)]),
    ("b...,b...->b", [(2, 3, 4), (2, 3, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
]


@devices
@pytest.mark.parametrize("case", EINSUM, ids=lambda c: c[0] if isinstance(c, str) else str(c))
def test_einsum(case, dev):
    formula, shapes = case
    check(shapes, lambda *xs: torch.einsum(formula, *xs), lambda *xs: Tensor.einsum(formula, *xs), dev=dev, atol=1e-5)


@devices
def test_einsum_operands_as_list(dev):
    check([(3, 4), (4, 2)], lambda a, b: torch.einsum("ij,jk->ik", [a, b]), lambda a, b: Tensor.einsum("ij,jk->ik", [a, b]), dev=dev, atol=1e-5)


@devices
def test_matmul_errors(dev):
    a, b = Tensor.ones(3, 4, device=dev), Tensor.ones(5, 6, device=dev)
    check_raises(RuntimeError, lambda: a @ b, "(3, 4)", "(5, 6)")
    check_raises(RuntimeError, lambda: a @ Tensor(2.0, device=dev), "()")
    check_raises(RuntimeError, lambda: Tensor(2.0, device=dev).matmul(a))
    check_raises(ValueError, lambda: Tensor.einsum("ij,jk->ik", a), "2 operands")
    check_raises(ValueError, lambda: Tensor.einsum("ijk->i", a), "ijk")
