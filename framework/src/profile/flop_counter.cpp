#include "tp/framework/profile/flop_counter.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "tp/framework/error.h"

namespace tp {
namespace {

enum class OpKind { kNone, kMm, kBmm, kConv, kSdpa };

/// Which formula an op name takes, and where its operands are.
struct OpRule {
  OpKind kind = OpKind::kNone;
  int first = 0;          ///< index of the first operand (addmm/baddbmm: 1, after `self`)
  int transposed = -1;    ///< index of the bool `transposed` argument; -1 = never transposed
};

OpRule rule_of(std::string_view name) {
  if (!name.starts_with("aten::")) return {};
  name.remove_prefix(6);
  if (name == "mm") return {OpKind::kMm, 0};
  if (name == "addmm") return {OpKind::kMm, 1};
  if (name == "bmm") return {OpKind::kBmm, 0};
  if (name == "baddbmm") return {OpKind::kBmm, 1};
  if (name == "convolution" || name == "_convolution" || name == "convolution_overrideable")
    return {OpKind::kConv, 0, 6};
  if (name == "cudnn_convolution" || name == "mkldnn_convolution" || name == "miopen_convolution" ||
      name == "_slow_conv2d_forward" || name == "thnn_conv2d" || name == "_nnpack_spatial_convolution")
    return {OpKind::kConv, 0};
  if (name == "scaled_dot_product_attention" || name == "_scaled_dot_product_attention_math" ||
      name == "_scaled_dot_product_flash_attention" || name == "_scaled_dot_product_flash_attention_for_cpu" ||
      name == "_scaled_dot_product_efficient_attention" || name == "_scaled_dot_product_cudnn_attention")
    return {OpKind::kSdpa, 0};
  return {};
}

using Shape = std::vector<int64_t>;

int64_t product(const Shape& s, std::size_t from = 0, std::size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (std::size_t i = from; i < std::min(to, s.size()); ++i) p *= s[i];
  return p;
}

/// What the start callback saw, for the end callback (inputs are readable only at the start).
struct OpContext : at::ObserverContext {
  OpRule rule;
  bool outermost = false;
  std::vector<Shape> operands; ///< shapes of the tensor operands the formula uses
  bool transposed = false;
};

/// torch.utils.flop_counter's formulas; `out` is the op's first output shape.
int64_t flops_of(const OpContext& c, const Shape& out) {
  const auto& in = c.operands;
  switch (c.rule.kind) {
    case OpKind::kMm: // [m, k] x [k, n]
      if (in.size() < 2 || in[0].size() != 2 || in[1].size() != 2) return 0;
      return 2 * in[0][0] * in[0][1] * in[1][1];
    case OpKind::kBmm: // [b, m, k] x [b, k, n]
      if (in.size() < 2 || in[0].size() != 3 || in[1].size() != 3) return 0;
      return 2 * in[0][0] * in[0][1] * in[0][2] * in[1][2];
    case OpKind::kConv: { // x [N, C_in, ...], w [C_out, C_in/groups, k...] (transposed: [C_in, C_out/groups, k...])
      if (in.size() < 2 || in[0].size() < 3 || in[1].size() < 3) return 0;
      const Shape& spatial = c.transposed ? in[0] : out;
      if (spatial.size() < 3) return 0;
      return 2 * product(spatial, 2) * product(in[1], 2) * in[0][0] * in[1][0] * in[1][1];
    }
    case OpKind::kSdpa: { // q [..., s_q, d_q], k [..., s_k, d_q], v [..., s_k, d_v]
      if (in.size() < 3 || in[0].size() < 2 || in[1].size() < 2 || in[2].size() < 2) return 0;
      const Shape &q = in[0], &k = in[1], &v = in[2];
      const int64_t batch_heads = product(q, 0, q.size() - 2);
      const int64_t s_q = q[q.size() - 2], d_q = q.back(), s_k = k[k.size() - 2], d_v = v.back();
      return 2 * batch_heads * s_q * s_k * d_q + 2 * batch_heads * s_q * s_k * d_v;
    }
    case OpKind::kNone: break;
  }
  return 0;
}

}  // namespace

struct FlopCounter::State {
  int depth = 0; ///< counted ops currently open on this thread
  std::vector<OpFlops> ops;
};

namespace {

// RecordFunction callbacks are plain function pointers without user data, so the tally they add
// to is found through this thread's active counter (set by the FlopCounter constructor, cleared
// by its destructor). It is per thread, like the callback itself.
thread_local FlopCounter::State* t_active = nullptr;

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  FlopCounter::State* state = t_active;
  if (state == nullptr) return nullptr;
  const OpRule rule = rule_of(fn.name());
  if (rule.kind == OpKind::kNone) return nullptr;
  auto context = std::make_unique<OpContext>();
  context->rule = rule;
  context->outermost = state->depth++ == 0;
  if (context->outermost) {
    const auto inputs = fn.inputs();
    const std::size_t needed = rule.kind == OpKind::kSdpa ? 3 : 2;
    for (std::size_t i = static_cast<std::size_t>(rule.first); i < inputs.size() && context->operands.size() < needed; ++i)
      if (inputs[i].isTensor()) context->operands.push_back(inputs[i].toTensor().sizes().vec());
    if (rule.transposed >= 0 && static_cast<std::size_t>(rule.transposed) < inputs.size() &&
        inputs[rule.transposed].isBool())
      context->transposed = inputs[rule.transposed].toBool();
  }
  return context;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* raw) {
  FlopCounter::State* state = t_active;
  auto* context = static_cast<OpContext*>(raw);
  if (state == nullptr || context == nullptr) return;
  --state->depth;
  if (!context->outermost) return;
  Shape out;
  if (!fn.outputs().empty() && fn.outputs().front().isTensor()) out = fn.outputs().front().toTensor().sizes().vec();
  const int64_t flops = flops_of(*context, out);
  const std::string_view name = fn.name();
  auto it = std::find_if(state->ops.begin(), state->ops.end(), [&](const OpFlops& o) { return o.op == name; });
  if (it == state->ops.end()) it = state->ops.insert(state->ops.end(), OpFlops{std::string(name), 0, 0});
  ++it->calls;
  it->flops += flops;
}

}  // namespace

FlopCounter::FlopCounter() : state_(std::make_unique<State>()) {
  TP_CHECK(t_active == nullptr, "a FlopCounter is already counting on this thread; nest none (count one forward pass at a time)");
  t_active = state_.get();
  // Only op calls (FUNCTION scope), not autograd nodes or user ranges.
  handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&on_start, &on_end)
                                           .needsInputs(true)
                                           .needsOutputs(true)
                                           .scopes({at::RecordScope::FUNCTION}));
}

FlopCounter::~FlopCounter() {
  at::removeCallback(handle_);
  t_active = nullptr;
}

int64_t FlopCounter::total_flops() const {
  int64_t total = 0;
  for (const auto& op : state_->ops) total += op.flops;
  return total;
}

std::vector<OpFlops> FlopCounter::by_operator() const { return state_->ops; }

}  // namespace tp
