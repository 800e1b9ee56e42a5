// Test support: what the autograd graph behind a tensor holds, for the activation-checkpointing
// tests of the helper, the vision models and the model zoo.
//
// Include before doctest: LibTorch must come first (plugin_harness.h says why).
#pragma once

#include <torch/csrc/autograd/function.h>

#include <set>
#include <string>
#include <vector>

namespace tp::test {

/// The names of every autograd node reachable from `t` ("AddmmBackward0", ...); empty for a
/// tensor without history.
inline std::set<std::string> graph_node_names(const at::Tensor& t) {
  std::set<std::string> names;
  std::vector<torch::autograd::Node*> pending;
  std::set<torch::autograd::Node*> seen;
  if (t.grad_fn()) pending.push_back(t.grad_fn().get());
  while (!pending.empty()) {
    torch::autograd::Node* node = pending.back();
    pending.pop_back();
    if (!seen.insert(node).second) continue;
    names.insert(node->name());
    for (const auto& edge : node->next_edges())
      if (edge.function) pending.push_back(edge.function.get());
  }
  return names;
}

/// Whether the graph behind `t` holds a tp::cpp activation-checkpoint node.
inline bool has_checkpoint_node(const at::Tensor& t) {
  for (const std::string& name : graph_node_names(t))
    if (name.find("CheckpointFunction") != std::string::npos) return true;
  return false;
}

}  // namespace tp::test
