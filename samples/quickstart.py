# Quickstart: a lazy tensor, a matmul, and its gradients.
#
# Run it:  build/bin/tensorscope samples/quickstart.py        (the debugger shows every step)
#          build/bin/tensorscope-cli run samples/quickstart.py  (headless; DEBUG=2 prints the schedule)
from tensorscope import Tensor

# Two leaf tensors. requires_grad=True asks backward() to fill in their .grad.
x = Tensor.eye(3, requires_grad=True)
y = Tensor([[2.0, 0, -2.0]], requires_grad=True)

# matmul is not a primitive: it becomes reshape + expand + mul + sum, and the sum over the result
# fuses into the same kernel. Nothing is computed here: z is a node in the lazy graph.
z = y.matmul(x).sum()      # builds the graph; nothing is computed yet

# backward() walks the graph in reverse and builds the gradient graph, which is lazy too:
# x.grad and y.grad are Tensors whose kernels run when their values are read.
z.backward()

# .numpy() realizes: the graph is scheduled into kernels, compiled and launched on the device.
print(x.grad.numpy())      # [[ 2  2  2] [ 0  0  0] [-2 -2 -2]]
print(y.grad.numpy())      # [[1 1 1]]
