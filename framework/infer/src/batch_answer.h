// One call's batch, from its files' samples to the answer: the samples read on the intra-op
// threads (each image's failure kept apart, for OpenOptions::skip_bad_images), then the forward
// and the classes, as `host predict` computes them.
#pragma once

#include <exception>
#include <string>
#include <vector>

#include "tp/framework/data/batch_layout.h"
#include "tp/framework/engine/batch_placement.h"
#include "tp/framework/plugin/dataset_proxy.h"
#include "tp/framework/plugin/model_proxy.h"
#include "tp/infer/model.h"

namespace tp::infer::detail {

/// Every sample of `data`, in order, with the failure of each one that could not be read (null
/// where it was). The files decode on LibTorch's intra-op threads, each a loader worker to the
/// plugin (get_sample is [worker], PLG-8: a sample does not depend on the worker); a serial
/// dataset reads on the calling thread.
struct ReadSamples {
  std::vector<NamedTensors> samples;        ///< empty where the sample failed
  std::vector<std::exception_ptr> failures; ///< one per sample
};
ReadSamples read_samples(const DatasetProxy& data);

/// The answer for `inputs`; `files`: the layout they were collated with when run_files read them
/// from files (per-pixel outputs then come at each file's size, answer_outputs.h). `top_k` >= 0
/// classes per image of the classification output (`host predict`'s rule: a floating [N, C]
/// output named logits or *_logits), softmax or, with `sigmoid_scores`, each class's own sigmoid;
/// named from `classes` when there is one name per class. Batch::rows is 0, ..., N - 1.
Batch answer(ModelProxy& model, const BatchPlacement& placement, const NamedTensors& inputs, const BatchLayout* files,
             int top_k, const std::vector<std::string>& classes, bool sigmoid_scores);

}  // namespace tp::infer::detail
