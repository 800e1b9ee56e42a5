#include "plugin/dist_service.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tp/framework/dist/collectives.h"
#include "tp/framework/dist/dist_context.h"
#include "tp/framework/error.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/util/abi_guard.h"

namespace tp {
namespace {

constexpr int64_t kMaxGatherDims = 8; // Collectives::all_gather_rows' limit, checked alike when local
constexpr const char* kGatherWhat = "gather a plugin's rows over ranks (tp.dist/2 all_gather)";
constexpr const char* kGatherBackwardWhat =
    "sum the gradient of a plugin's gathered rows over ranks (the backward of tp.dist/2 all_gather)";

/// Records `message` as the calling thread's last error (what fail() does) and returns `code`.
tp_status refuse(tp_status code, const std::string& message) {
  HostServices::set_last_error("tp.dist/2 " + message);
  return code;
}

/// Where a call goes: nowhere (local, the identity) or the process group.
struct Reach {
  Collectives* collectives = nullptr; ///< null: local
  DistContext* group = nullptr;
};

/// The reach of a call now (host.h: local for one process and inside evaluations and predictions).
/// Throws a status through `*refused` when this process is one of several ranks but holds no
/// process group (a command that joined none): pretending to be alone would train something else.
Reach reach_of(const HostServices& self, tp_status* refused) {
  *refused = TP_OK;
  if (self.world_size() <= 1) return {};
  DistContext* group = self.process_group();
  if (group == nullptr) {
    *refused = refuse(TP_ERR_UNSUPPORTED, "this process is one of " + std::to_string(self.world_size()) +
                                              " ranks, but this command joined no process group");
    return {};
  }
  if (group->plugin_calls_local()) return {};
  group->note_plugin_collectives();  // a plugin that fetched the table before the group existed
  return {self.plugin_collectives(), group};
}

std::string device_mismatch(const char* call, const at::Tensor& tensor, const DistContext& group) {
  return std::string(call) + ": the tensor is on " + tensor.device().str() + ", but the process group (" +
         group.backend() + ") reduces tensors on " + group.device().str() + "; move it there first";
}

/// The gathered rows with a gradient: backward sums the result's gradient over ranks (one
/// all-reduce, every rank) and hands this rank's input its own rows of the sum, as
/// torch.distributed.nn.functional.all_gather does.
struct GatherRows : public torch::autograd::Function<GatherRows> {
  /// `*own_offset` receives where this rank's rows start in the result.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input, Collectives* collectives,
                            int64_t* own_offset) {
    std::vector<int64_t> counts;
    at::Tensor all = collectives->all_gather_rows(input, kGatherWhat, &counts);
    int64_t offset = 0;
    for (int r = 0; r < collectives->rank(); ++r) offset += counts[static_cast<std::size_t>(r)];
    *own_offset = offset;
    ctx->saved_data["offset"] = offset;
    ctx->saved_data["count"] = counts[static_cast<std::size_t>(collectives->rank())];
    // saved_data holds IValues only; the Collectives is the HostServices', which outlives every
    // backward (the session holds both), so its address travels as an integer.
    ctx->saved_data["collectives"] = static_cast<int64_t>(reinterpret_cast<std::intptr_t>(collectives));
    ctx->saved_data["sizes"] = all.sizes().vec();
    return all;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto address = static_cast<std::intptr_t>(ctx->saved_data["collectives"].toInt());
    auto* collectives = reinterpret_cast<Collectives*>(address);
    // A rank whose loss gives the rows no gradient still joins the sum, with zeros.
    at::Tensor grad = grads[0].defined() ? grads[0].clone(at::MemoryFormat::Contiguous)
                                         : at::zeros(ctx->saved_data["sizes"].toIntVector(),
                                                     at::TensorOptions().device(collectives->device()));
    std::vector<at::Tensor> one{grad};
    collectives->all_reduce_sum(one, kGatherBackwardWhat);
    return {grad.narrow(0, ctx->saved_data["offset"].toInt(), ctx->saved_data["count"].toInt()), at::Tensor(),
            at::Tensor()};
  }
};

tp_status dist_all_reduce(const tp_host_t* host, tp_tensor handle, int32_t op) noexcept {
  return detail::guard_status(
      [&]() -> tp_status {
        if (host == nullptr || host->host_data == nullptr) return TP_ERR_INVALID_ARGUMENT;
        if (handle == nullptr) return refuse(TP_ERR_INVALID_ARGUMENT, "all_reduce: the tensor is NULL");
        at::Tensor& tensor = *reinterpret_cast<at::Tensor*>(handle);
        // Checked on every path, a single process included, so a mistake shows in the first test run.
        if (!tensor.defined()) return refuse(TP_ERR_INVALID_ARGUMENT, "all_reduce: the tensor is undefined");
        if (op != TP_REDUCE_SUM && op != TP_REDUCE_MEAN && op != TP_REDUCE_MAX)
          return refuse(TP_ERR_INVALID_ARGUMENT,
                        "all_reduce: unknown op " + std::to_string(op) +
                            "; use TP_REDUCE_SUM (0), TP_REDUCE_MEAN (1) or TP_REDUCE_MAX (2)");
        if (op == TP_REDUCE_MEAN && !at::isFloatingType(tensor.scalar_type()))
          return refuse(TP_ERR_INVALID_ARGUMENT,
                        std::string("all_reduce: TP_REDUCE_MEAN of a ") + c10::toString(tensor.scalar_type()) +
                            " tensor; reduce with TP_REDUCE_SUM and divide in a floating dtype");
        if (tensor.requires_grad())
          return refuse(TP_ERR_INVALID_ARGUMENT,
                        "all_reduce: the tensor requires grad, and all_reduce has no gradient; reduce statistics "
                        "(under no_grad, or detached), or use all_gather for rows that need one");
        tp_status refused = TP_OK;
        const Reach reach = reach_of(*static_cast<const HostServices*>(host->host_data), &refused);
        if (refused != TP_OK) return refused;
        if (reach.collectives == nullptr) return TP_OK; // one rank's sum, mean and maximum: itself
        if (tensor.device() != reach.group->device())
          return refuse(TP_ERR_INVALID_ARGUMENT, device_mismatch("all_reduce", tensor, *reach.group));
        c10::NoGradGuard no_grad;
        // c10d reduces dense contiguous tensors; another layout is reduced in a copy, copied back.
        at::Tensor work = tensor.is_contiguous() ? tensor : tensor.contiguous();
        std::vector<at::Tensor> one{work};
        try {
          if (op == TP_REDUCE_MAX) reach.group->all_reduce_max(one, "reduce a plugin's tensor over ranks (tp.dist/2)");
          else reach.collectives->all_reduce_sum(one, "reduce a plugin's tensor over ranks (tp.dist/2)");
        } catch (const Error& e) {
          return refuse(TP_ERR_DEVICE, std::string("all_reduce: ") + e.what());
        }
        if (op == TP_REDUCE_MEAN) work.div_(static_cast<double>(reach.collectives->world_size()));
        if (!work.is_same(tensor)) tensor.copy_(work);
        return TP_OK;
      },
      [](const char* message) { HostServices::set_last_error(std::string("tp.dist/2 all_reduce: ") + message); });
}

tp_status dist_all_gather(const tp_host_t* host, tp_tensor handle, tp_tensor* out, int64_t* out_own_offset) noexcept {
  return detail::guard_status(
      [&]() -> tp_status {
        if (host == nullptr || host->host_data == nullptr) return TP_ERR_INVALID_ARGUMENT;
        if (out == nullptr) return refuse(TP_ERR_INVALID_ARGUMENT, "all_gather: out is NULL");
        *out = nullptr;
        if (out_own_offset != nullptr) *out_own_offset = 0;
        if (handle == nullptr) return refuse(TP_ERR_INVALID_ARGUMENT, "all_gather: the input is NULL");
        const at::Tensor& input = *reinterpret_cast<const at::Tensor*>(handle);
        if (!input.defined()) return refuse(TP_ERR_INVALID_ARGUMENT, "all_gather: the input is undefined");
        tp_status refused = TP_OK;
        const Reach reach = reach_of(*static_cast<const HostServices*>(host->host_data), &refused);
        if (refused != TP_OK) return refused;
        at::Tensor result;
        int64_t offset = 0;
        if (reach.collectives == nullptr) {
          // Refused alike locally, so a plugin tested in one process holds under several.
          if (input.dim() < 1 || input.dim() > kMaxGatherDims)
            return refuse(TP_ERR_INVALID_ARGUMENT, "all_gather: the input has " + std::to_string(input.dim()) +
                                                       " dims; rows are [N, ...] with 1 to 8 dims");
          result = input;
        } else {
          if (input.device() != reach.group->device())
            return refuse(TP_ERR_INVALID_ARGUMENT, device_mismatch("all_gather", input, *reach.group));
          try {
            result = GatherRows::apply(input, reach.collectives, &offset);
          } catch (const RowsMismatch& e) {
            return refuse(TP_ERR_INVALID_ARGUMENT, std::string("all_gather: ") + e.what());
          } catch (const Error& e) {
            return refuse(TP_ERR_DEVICE, std::string("all_gather: ") + e.what());
          }
        }
        *out = reinterpret_cast<tp_tensor>(new at::Tensor(std::move(result)));
        if (out_own_offset != nullptr) *out_own_offset = offset;
        return TP_OK;
      },
      [](const char* message) { HostServices::set_last_error(std::string("tp.dist/2 all_gather: ") + message); });
}

}  // namespace

tp_dist_v2_t dist_v2_table(const tp_dist_v1_t& place) {
  tp_dist_v2_t table{};
  table.struct_size = sizeof(tp_dist_v2_t);
  table.rank = place.rank;
  table.world_size = place.world_size;
  table.local_rank = place.local_rank;
  table.local_world_size = place.local_world_size;
  table.all_reduce = &dist_all_reduce;
  table.all_gather = &dist_all_gather;
  return table;
}

}  // namespace tp
