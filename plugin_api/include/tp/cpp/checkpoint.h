// Former name of tp/cpp/activation_checkpoint.h (activation checkpointing helpers), kept so that
// plugin sources written against SDK 1.2 still build. Include "tp/cpp/activation_checkpoint.h":
// this forwarding header is removed in SDK 1.4. (The name said "checkpoint", which in torchhost
// means the run's saved training state; the helpers recompute activations, nothing more.)
#ifndef TP_CPP_CHECKPOINT_H
#define TP_CPP_CHECKPOINT_H

#include "tp/cpp/activation_checkpoint.h"

#endif  // TP_CPP_CHECKPOINT_H
