// DLPack include order, aten first: LibTorch's <ATen/dlpack.h> defines the DLPack types, tp/dlpack.h is skipped.
// The other order is dlpack_order_tp_first.cpp; both must compile and agree.
#include <ATen/DLConvertor.h>
#include "tp/cpp/dlpack.h"
#include "tp/iface/dataset.h"

#include "dlpack_order_check.h"

#include <vector>

#undef CHECK  // c10's logging CHECK; doctest's takes its place
#include <doctest/doctest.h>

TEST_CASE("DLPack, aten header first: LibTorch takes a field the SDK made, and runs its deleter once") {
  static int deleted = 0;
  deleted = 0;
  DLManagedTensor* managed = tp::cpp::make_dlpack(std::vector<float>{1.5F, 2.5F, 3.5F}, {3});
  using Deleter = void (*)(DLManagedTensor*);
  static Deleter forward_to = nullptr;  // the SDK's deleter, which frees the buffer
  forward_to = managed->deleter;
  managed->deleter = [](DLManagedTensor* self) {
    ++deleted;
    forward_to(self);
  };
  {
    const at::Tensor tensor = at::fromDLPack(managed);
    CHECK((tensor.scalar_type() == at::kFloat));
    CHECK(tensor.size(0) == 3);
    CHECK(tensor[2].item<float>() == 3.5F);
  }
  CHECK(deleted == 1);
}
