// The optimizers' updates (see tensorscope/optim.h). Each line builds the op the Python formula in
// nn/optim.py names, in the same order, so the schedule and its kernels are the same whichever side built them.
#include "tensorscope/optim.h"

#include <map>
#include <stdexcept>
#include <string>
#include <utility>

namespace ts::optim {

namespace {

void check_lengths(const char* what, size_t params, size_t other, const char* other_name) {
  if (params != other)
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(params) + " parameters but " +
                                std::to_string(other) + " " + other_name);
}

// The learning rate in each parameter's dtype, on its device, built once per (device, dtype) for all the
// parameters of a step: a float16 parameter's update multiplies by lr rounded to float16, as by a python
// float next to it (Tensor::const_like); a parameter on another device than lr's gets a copy of it (a model
// whose layers live on two devices), one copy for all the parameters there.
class LearningRates {
 public:
  explicit LearningRates(const Tensor& lr) : lr_(lr) {
    if (lr.ndim() != 0)
      throw std::invalid_argument("optimizer: lr must be a 0-d tensor, got " + std::to_string(lr.ndim()) + " dims");
  }
  const Tensor& for_param(const Tensor& p) {
    auto key = std::make_pair(p.device(), p.dtype());
    auto it = made_.find(key);
    if (it == made_.end()) {
      const Tensor here = p.device() == lr_.device() ? lr_ : lr_.to(p.device());
      it = made_.emplace(key, p.dtype() == here.dtype() ? here : here.cast(p.dtype())).first;
    }
    return it->second;
  }

 private:
  const Tensor& lr_;
  std::map<std::pair<std::string, DType>, Tensor> made_;
};

}  // namespace

void sgd_update(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& momentum_buffers, const Tensor& lr, double momentum,
                double weight_decay, bool nesterov) {
  check_lengths("sgd_update", params.size(), grads.size(), "gradients");
  if (momentum != 0) check_lengths("sgd_update", params.size(), momentum_buffers.size(), "momentum buffers");
  LearningRates lrs(lr);
  for (size_t i = 0; i < params.size(); i++) {
    Tensor p = params[i], g = grads[i];
    if (weight_decay != 0) g = g.add(p.detach().mul(weight_decay));
    if (momentum != 0) {
      Tensor b = momentum_buffers[i];
      b.assign(b.mul(momentum).add(g));
      g = nesterov ? g.add(b.mul(momentum)) : b;
    }
    p.assign(p.detach().sub(g.mul(lrs.for_param(p))));
  }
}

void lamb_update(const std::vector<Tensor>& params, const std::vector<Tensor>& grads, const std::vector<Tensor>& m,
                 const std::vector<Tensor>& v, const Tensor& b1_t, const Tensor& b2_t, const Tensor& lr, double b1,
                 double b2, double eps, double weight_decay, bool adam) {
  check_lengths("lamb_update", params.size(), grads.size(), "gradients");
  check_lengths("lamb_update", params.size(), m.size(), "first moments");
  check_lengths("lamb_update", params.size(), v.size(), "second moments");
  LearningRates lrs(lr);
  Tensor b1_power = b1_t, b2_power = b2_t;
  b1_power.assign(b1_power.mul(b1));
  b2_power.assign(b2_power.mul(b2));
  // the bias corrections 1 - b^t, built once per step for all parameters (each kernel computes its own)
  const Tensor correction1 = b1_power.const_like(1.0).sub(b1_power);
  const Tensor correction2 = b2_power.const_like(1.0).sub(b2_power);
  for (size_t i = 0; i < params.size(); i++) {
    Tensor p = params[i], g = grads[i], mi = m[i], vi = v[i];
    mi.assign(mi.mul(b1).add(g.mul(1.0 - b1)));
    vi.assign(vi.mul(b2).add(g.mul(g).mul(1.0 - b2)));
    const Tensor m_hat = mi.div(correction1);
    const Tensor v_hat = vi.div(correction2);
    Tensor up = m_hat.div(v_hat.sqrt().add(eps));
    if (weight_decay != 0) up = up.add(p.detach().mul(weight_decay));
    if (!adam) {  // the trust ratio ||p|| / ||u||, 1 where either norm is 0
      const Tensor r1 = p.detach().square().sum().sqrt(), r2 = up.square().sum().sqrt();
      const Tensor both_positive = r1.gt(r1.scalar_like(0)).logical_and(r2.gt(r2.scalar_like(0)));
      const Tensor ratio = r1.div(r2);
      up = up.mul(both_positive.where(ratio, ratio.scalar_like(1.0)));
    }
    p.assign(p.detach().sub(up.mul(lrs.for_param(p))));
  }
}

}  // namespace ts::optim
