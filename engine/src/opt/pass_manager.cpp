#include "opt/pass_manager.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "tensorscope/session.h"

namespace ts {

const std::vector<Pass>& pipeline() {
  static const std::vector<Pass> passes = {
      {"hoist_constants", "move constants to the top of the kernel, out of every loop", hoist_constants},
      {"dead_code_elimination", "drop instructions whose value is never used", dead_code_elimination},
      {"reorder_global_loops",
       "the output loop along which a load is contiguous goes innermost, a loop that reuses that load next to it",
       reorder_global_loops},
      {"loop_invariant_code_motion", "compute values (and whole reductions) that do not change in a loop before it",
       loop_invariant_code_motion},
      {"tile_local", "TILE (GPU): a matmul in output tiles, one workgroup each, operand tiles in local memory",
       tile_local},
      {"transpose_tile",
       "TRANSPOSE_TILE (C): a copy that transposes (a weight packed as Wᵀ) runs in 8×8 tiles, each transposed in registers",
       transpose_tile},
      {"columns_as_lanes",
       "a column sum (a bias's gradient) walks its rows once, all its columns' accumulators side by side in a loop "
       "the C compiler vectorizes",
       columns_as_lanes},
      {"padto", "PADTO: the loop UPCAST_GLOBAL is for runs to a multiple of the plan's amount, the extra iterations masked",
       padto},
      {"upcast_global", "UPCAST: up to 32 neighbouring outputs share one pass of their reduce loop",
       upcast_global},
      {"register_tile", "UPCAST a second output axis by 8 and move it innermost (matmul register tile)",
       register_tile},
      {"split_index_set",
       "a loop that compares its index with constants (a concatenation's gradient) runs as one loop per range, "
       "each without the comparisons",
       split_index_set},
      {"simplify", "fold constants, simplify index arithmetic and merge equal values again (after UPCAST)", simplify},
      {"delinearize_reduce",
       "a loop over merged axes whose index is taken apart by / and % (a tiled convolution's channels and taps, an "
       "elementwise copy of attention's heads back into rows) runs as one nested loop per axis",
       delinearize_reduce},
      {"rows_as_lanes",
       "reductions over short rows with a transcendental (a softmax over 12 keys, a logsumexp's max and sum), or a "
       "total over short rows (a cross-entropy's mean over the batch), runs 16 rows as the lanes of a loop the C "
       "compiler vectorizes",
       rows_as_lanes},
      {"group_reduce", "GROUP (GPU): a reduce split across the lanes of a workgroup, partials combined in local memory",
       group_reduce},
      {"upcast_reduce", "UPCAST: the innermost reduce loop keeps up to 16 partial accumulators (vectorizable)",
       upcast_reduce},
      {"max_reduce_as_int", "a float max-reduction runs on order-preserving int32 keys (vectorizes; NaN still wins)",
       max_reduce_as_int},
      {"coalesce_short_rows",
       "an elementwise loop over short rows (a softmax over 12 keys) runs over several rows at once (8 of 12, 16 of 11), "
       "the values per row spread out in local memory: one loop the C compiler vectorizes in whole vectors",
       coalesce_short_rows},
      {"fuse_multiply_add", "acc = acc + a*b becomes one fused multiply-add (MULACC)", fuse_multiply_add},
      {"sink_after_loops", "values used only after a loop (an epilogue's loads) are computed after it, not held through it",
       sink_after_loops},
      {"local_size", "LOCAL (GPU): the number of threads per workgroup", local_size},
  };
  return passes;
}

static std::set<std::string> disabled_passes() {
  std::set<std::string> out;
  if (const char* env = std::getenv("TENSORSCOPE_DISABLE_PASSES")) {
    std::stringstream ss(env);
    std::string name;
    while (std::getline(ss, name, ','))
      if (!name.empty()) out.insert(name);
  }
  return out;
}

// Test mode: TENSORSCOPE_RANDOM_PASSES=<seed> disables a random subset of the passes for every kernel
// (a different subset per kernel, reproducible from the seed). The op tests must pass unchanged.
static bool random_skip(const ir::Kernel& kernel, size_t pass_index) {
  static const char* seed = std::getenv("TENSORSCOPE_RANDOM_PASSES");
  if (!seed || !*seed) return false;
  uint64_t h = std::hash<std::string>{}(std::string(seed) + "/" + kernel.name + "/" + std::to_string(kernel.insts.size()));
  return (h >> (pass_index % 60)) & 1;
}

// Same instructions and applied opts: the listing would be the same text.
static bool same_kernel(const ir::Kernel& a, const std::vector<ir::Inst>& insts, size_t opts) {
  if (a.insts.size() != insts.size() || a.opts.size() != opts) return false;
  for (size_t i = 0; i < insts.size(); i++) {
    const ir::Inst &x = a.insts[i], &y = insts[i];
    if (x.op != y.op || x.dtype != y.dtype || x.num_src != y.num_src || x.arg != y.arg ||
        std::memcmp(&x.value, &y.value, sizeof x.value) != 0 || !std::equal(x.src, x.src + x.num_src, y.src))
      return false;
  }
  return true;
}

void run_passes(ir::Kernel& kernel, std::vector<PassSnapshot>* snapshots, int kernel_id, bool gated) {
  static const std::set<std::string> disabled = disabled_passes();
  if (kernel.plan.automatic()) {
    // TENSORSCOPE_OPTS: one plan for every kernel of the process (an invalid one raises at the first kernel)
    static const char* env = std::getenv("TENSORSCOPE_OPTS");
    if (env && *env) {
      static const ir::OptPlan plan = ir::OptPlan::parse(env);
      kernel.plan = plan;
    }
  }
  std::vector<ir::Inst> before;
  for (size_t i = 0; i < pipeline().size(); i++) {
    const Pass& p = pipeline()[i];
    if (disabled.count(p.name) || random_skip(kernel, i)) continue;
    const size_t opts = kernel.opts.size();
    if (snapshots) before = kernel.insts;
    p.run(kernel);
    if (auto errors = ir::verify(kernel); !errors.empty())
      throw std::logic_error(std::string("IR verifier failed after pass ") + p.name + " in " + kernel.name + ": " + errors.front());
    if (snapshots) {
      // a pass that changed nothing (about half of them) shares the listing before it; the others keep a copy
      // of the kernel, printed when someone reads the listing (PassSnapshot)
      if (!snapshots->empty() && same_kernel(kernel, before, opts)) snapshots->emplace_back(p.name, snapshots->back());
      else snapshots->emplace_back(p.name, kernel);
    }
    if (gated) Session::get().gate(GateStop::AfterPass, kernel_id, kernel.name, p.name);
  }
}

std::vector<size_t> global_loops(const std::vector<ir::Inst>& insts) {
  std::vector<size_t> loops;
  for (size_t i = 0; i < insts.size(); i++)
    if (insts[i].op == ir::Op::Range && insts[i].arg == ir::kGlobalLoop) loops.push_back(i);
  return loops;
}

size_t end_of_range(const std::vector<ir::Inst>& insts, size_t range) {
  int depth = 0;
  for (size_t i = range; i < insts.size(); i++) {
    if (insts[i].op == ir::Op::Range) depth++;
    if (insts[i].op == ir::Op::EndRange && --depth == 0) return i;
  }
  return insts.size();
}

void reorder_instructions(ir::Kernel& kernel, const std::vector<ir::ValueId>& order) {
  std::vector<ir::ValueId> new_id(kernel.insts.size(), ir::kNone);
  std::vector<ir::Inst> out;
  out.reserve(order.size());
  for (ir::ValueId old : order) {
    new_id[old] = static_cast<ir::ValueId>(out.size());
    ir::Inst in = kernel.insts[old];
    for (int s = 0; s < in.num_src; s++) in.src[s] = new_id[in.src[s]];
    out.push_back(in);
  }
  kernel.insts = std::move(out);
}

double loop_work(const ir::Kernel& k) {
  double work = 0, trips = 1;
  std::vector<double> stack;
  for (const ir::Inst& in : k.insts) {
    if (in.op == ir::Op::Range) {
      const double bound = k.insts[in.src[0]].value;
      stack.push_back(bound);
      trips *= bound;
    } else if (in.op == ir::Op::EndRange) {
      trips /= stack.back();
      stack.pop_back();
    } else if (in.op != ir::Op::Const && in.op != ir::Op::DefineGlobal) {
      work += trips;
    }
  }
  return work;
}

int loop_depth(const std::vector<ir::Inst>& insts, size_t i) {
  int depth = 0;
  for (size_t j = 0; j < i; j++) depth += insts[j].op == ir::Op::Range ? 1 : insts[j].op == ir::Op::EndRange ? -1 : 0;
  return depth;
}

int64_t eval_index(const std::vector<ir::Inst>& insts, ir::ValueId v, ir::ValueId var, int64_t at, int depth) {
  const ir::Inst& in = insts[v];
  if (v == var) return at;
  if (depth > 64) return 0;
  auto s = [&](int i) { return eval_index(insts, in.src[i], var, at, depth + 1); };
  switch (in.op) {
    case ir::Op::Const: return static_cast<int64_t>(in.value);
    case ir::Op::Add: return s(0) + s(1);
    case ir::Op::Mul: return s(0) * s(1);
    case ir::Op::Neg: return -s(0);
    case ir::Op::IDiv: { int64_t d = s(1); return d ? s(0) / d : 0; }
    case ir::Op::Mod: { int64_t d = s(1); return d ? s(0) % d : 0; }
    default: return 0;  // other loops, loads: taken as 0
  }
}

bool depends_on(const std::vector<ir::Inst>& insts, ir::ValueId v, ir::ValueId var, std::vector<int8_t>& memo) {
  if (v == var) return true;
  if (memo[v] >= 0) return memo[v];
  bool d = false;
  for (int s = 0; s < insts[v].num_src && !d; s++) d = depends_on(insts, insts[v].src[s], var, memo);
  memo[v] = d;
  return d;
}

}  // namespace ts
