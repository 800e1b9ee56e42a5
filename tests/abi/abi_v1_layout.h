/* The released layout of plugin ABI 1 on x86-64 (System V, LP64), as one table that both the C
 * and the C++ compiler check (c_layout_check.c, layout_test.cpp). Sizes are those of the current
 * minor (TP_ABI_MINOR); TP_ABI_V1_GROWN lists the sizes older minors wrote.
 *
 * These numbers ARE the ABI: plugins compiled against 1.0 hard-code them. Changing any of them,
 * by inserting, removing, reordering or retyping a member, breaks every ABI 1 plugin in the field.
 * Grow a struct only at its end (ARCH-5); then add the member's offset here (marked with the minor
 * that added it), update its size, and add a TP_ABI_V1_GROWN row with the size it had before;
 * never edit an existing offset. A failing assertion here means the change must not ship as ABI 1. */
#ifndef TP_TESTS_ABI_V1_LAYOUT_H
#define TP_TESTS_ABI_V1_LAYOUT_H

/* X(type, sizeof, alignof) */
#define TP_ABI_V1_SIZES(X)         \
  X(tp_version_t, 12, 4)           \
  X(tp_host_t, 56, 8)              \
  X(tp_dist_v1_t, 20, 4)           \
  X(tp_dist_v2_t, 40, 8)           /* @since 1.14 */ \
  X(tp_config_key_t, 40, 8)        \
  X(tp_config_t, 80, 8)            \
  X(tp_build_info_t, 24, 8)        \
  X(tp_example_input_t, 96, 8)     \
  X(tp_descriptor_t, 72, 8)        \
  X(tp_plugin_entry_t, 72, 8)      \
  X(tp_field_t, 16, 8)             \
  X(tp_worker_ctx_t, 40, 8)        /* 1.11: +encoded_images */ \
  X(tp_dataset_v1_t, 96, 8)        /* 1.5: +prepare, 1.6: +field_batching, 1.10: +sample_groups, 1.11: +encoded_images, 1.12: +class_names, 1.13: +sample_keys */ \
  X(tp_field_batching_t, 24, 8)    /* @since 1.6 */ \
  X(tp_encoded_image_t, 64, 8)     /* @since 1.11 */ \
  X(tp_class_names_t, 24, 8)       /* @since 1.12 */ \
  X(tp_scalar_t, 16, 8)            \
  X(tp_event_t, 56, 8)             \
  X(tp_callback_v1_t, 32, 8)       \
  X(tp_named_tensor_t, 16, 8)      \
  X(tp_model_v1_t, 104, 8)          /* 1.8: +check_graph_capture, 1.14: +after_optimizer_step, set_batchnorm_frozen_at */ \
  X(tp_layer_depth_t, 16, 8)       /* @since 1.4 */ \
  X(tp_loss_v1_t, 48, 8)            /* 1.9: +describe */ \
  X(tp_field_contract_t, 24, 8)     /* @since 1.9 */ \
  X(tp_loss_description_t, 48, 8)   /* @since 1.9 */ \
  X(tp_metric_v1_t, 72, 8)          /* 1.7: +visit_gathered_state */ \
  X(tp_batch_transform_v1_t, 32, 8) /* @since 1.3 */

/* X(type, member, offsetof) for every member of every struct above. */
#define TP_ABI_V1_OFFSETS(X)                      \
  X(tp_version_t, major, 0)                       \
  X(tp_version_t, minor, 4)                       \
  X(tp_version_t, patch, 8)                       \
  X(tp_host_t, struct_size, 0)                    \
  X(tp_host_t, abi, 4)                            \
  X(tp_host_t, host_data, 16)                     \
  X(tp_host_t, fail, 24)                          \
  X(tp_host_t, log, 32)                           \
  X(tp_host_t, get_service, 40)                   \
  X(tp_host_t, tensor_release, 48)                \
  X(tp_dist_v1_t, struct_size, 0)                 \
  X(tp_dist_v1_t, rank, 4)                        \
  X(tp_dist_v1_t, world_size, 8)                  \
  X(tp_dist_v1_t, local_rank, 12)                 \
  X(tp_dist_v1_t, local_world_size, 16)           \
  X(tp_dist_v2_t, struct_size, 0)                /* @since 1.14 */ \
  X(tp_dist_v2_t, rank, 4)                        /* @since 1.14 */ \
  X(tp_dist_v2_t, world_size, 8)                  /* @since 1.14 */ \
  X(tp_dist_v2_t, local_rank, 12)                 /* @since 1.14 */ \
  X(tp_dist_v2_t, local_world_size, 16)           /* @since 1.14 */ \
  X(tp_dist_v2_t, all_reduce, 24)                 /* @since 1.14 */ \
  X(tp_dist_v2_t, all_gather, 32)                 /* @since 1.14 */ \
  X(tp_config_key_t, struct_size, 0)              \
  X(tp_config_key_t, name, 8)                     \
  X(tp_config_key_t, type, 16)                    \
  X(tp_config_key_t, default_value, 24)           \
  X(tp_config_key_t, help, 32)                    \
  X(tp_config_t, struct_size, 0)                  \
  X(tp_config_t, self, 8)                         \
  X(tp_config_t, get_bool, 16)                    \
  X(tp_config_t, get_int, 24)                     \
  X(tp_config_t, get_float, 32)                   \
  X(tp_config_t, get_string, 40)                  \
  X(tp_config_t, get_array_size, 48)              \
  X(tp_config_t, get_int_at, 56)                  \
  X(tp_config_t, get_float_at, 64)                \
  X(tp_config_t, get_string_at, 72)               \
  X(tp_build_info_t, struct_size, 0)              \
  X(tp_build_info_t, torch_version, 8)            \
  X(tp_build_info_t, cxx11_abi, 16)               \
  X(tp_build_info_t, device_build, 20)            \
  X(tp_example_input_t, struct_size, 0)           \
  X(tp_example_input_t, name, 8)                  \
  X(tp_example_input_t, dtype, 16)                \
  X(tp_example_input_t, ndim, 20)                 \
  X(tp_example_input_t, shape, 24)                \
  X(tp_example_input_t, class_count, 88)          \
  X(tp_descriptor_t, struct_size, 0)              \
  X(tp_descriptor_t, id, 8)                       \
  X(tp_descriptor_t, kind, 16)                    \
  X(tp_descriptor_t, tier, 20)                    \
  X(tp_descriptor_t, version, 24)                 \
  X(tp_descriptor_t, description, 32)            \
  X(tp_descriptor_t, keys, 40)                    \
  X(tp_descriptor_t, key_count, 48)               \
  X(tp_descriptor_t, examples, 56)                \
  X(tp_descriptor_t, example_count, 64)           \
  X(tp_descriptor_t, flags, 68)                   \
  X(tp_plugin_entry_t, struct_size, 0)            \
  X(tp_plugin_entry_t, abi, 4)                    \
  X(tp_plugin_entry_t, build, 16)                 \
  X(tp_plugin_entry_t, name, 24)                  \
  X(tp_plugin_entry_t, init, 32)                  \
  X(tp_plugin_entry_t, deinit, 40)                \
  X(tp_plugin_entry_t, descriptor_count, 48)      \
  X(tp_plugin_entry_t, descriptor_at, 56)         \
  X(tp_plugin_entry_t, get_interface, 64)         \
  X(tp_field_t, name, 0)                          \
  X(tp_field_t, tensor, 8)                        \
  X(tp_worker_ctx_t, struct_size, 0)              \
  X(tp_worker_ctx_t, worker, 4)                   \
  X(tp_worker_ctx_t, num_workers, 8)              \
  X(tp_worker_ctx_t, rank, 12)                    \
  X(tp_worker_ctx_t, epoch, 16)                   \
  X(tp_worker_ctx_t, seed, 24)                    \
  X(tp_worker_ctx_t, encoded_images, 32)          /* @since 1.11 */ \
  X(tp_dataset_v1_t, struct_size, 0)              \
  X(tp_dataset_v1_t, create, 8)                   \
  X(tp_dataset_v1_t, destroy, 16)                 \
  X(tp_dataset_v1_t, size, 24)                    \
  X(tp_dataset_v1_t, get_sample, 32)              \
  X(tp_dataset_v1_t, set_epoch, 40)               \
  X(tp_dataset_v1_t, prepare, 48)                 /* @since 1.5 */ \
  X(tp_dataset_v1_t, field_batching, 56)          /* @since 1.6 */ \
  X(tp_dataset_v1_t, sample_groups, 64)           /* @since 1.10 */ \
  X(tp_dataset_v1_t, encoded_images, 72)          /* @since 1.11 */ \
  X(tp_dataset_v1_t, class_names, 80)             /* @since 1.12 */ \
  X(tp_dataset_v1_t, sample_keys, 88)             /* @since 1.13 */ \
  X(tp_field_batching_t, struct_size, 0)          /* @since 1.6 */ \
  X(tp_field_batching_t, batching, 4)             /* @since 1.6 */ \
  X(tp_field_batching_t, name, 8)                 /* @since 1.6 */ \
  X(tp_field_batching_t, pad_value, 16)           /* @since 1.6 */ \
  X(tp_encoded_image_t, struct_size, 0)           /* @since 1.11 */ \
  X(tp_encoded_image_t, available, 4)             /* @since 1.11 */ \
  X(tp_encoded_image_t, name, 8)                  /* @since 1.11 */ \
  X(tp_encoded_image_t, reason, 16)               /* @since 1.11 */ \
  X(tp_encoded_image_t, out_height, 24)           /* @since 1.11 */ \
  X(tp_encoded_image_t, out_width, 28)            /* @since 1.11 */ \
  X(tp_encoded_image_t, mean, 32)                 /* @since 1.11 */ \
  X(tp_encoded_image_t, std, 44)                  /* @since 1.11 */ \
  X(tp_encoded_image_t, channels_last, 56)        /* @since 1.11 */ \
  X(tp_class_names_t, struct_size, 0)             /* @since 1.12 */ \
  X(tp_class_names_t, count, 4)                   /* @since 1.12 */ \
  X(tp_class_names_t, field, 8)                   /* @since 1.12 */ \
  X(tp_class_names_t, names, 16)                  /* @since 1.12 */ \
  X(tp_scalar_t, name, 0)                         \
  X(tp_scalar_t, value, 8)                        \
  X(tp_event_t, struct_size, 0)                   \
  X(tp_event_t, kind, 4)                          \
  X(tp_event_t, step, 8)                          \
  X(tp_event_t, epoch, 16)                        \
  X(tp_event_t, lr, 24)                           \
  X(tp_event_t, scalars, 32)                      \
  X(tp_event_t, scalar_count, 40)                 \
  X(tp_event_t, message, 48)                      \
  X(tp_callback_v1_t, struct_size, 0)             \
  X(tp_callback_v1_t, create, 8)                  \
  X(tp_callback_v1_t, destroy, 16)                \
  X(tp_callback_v1_t, on_event, 24)               \
  X(tp_named_tensor_t, name, 0)                   \
  X(tp_named_tensor_t, tensor, 8)                 \
  X(tp_model_v1_t, struct_size, 0)                \
  X(tp_model_v1_t, create, 8)                     \
  X(tp_model_v1_t, destroy, 16)                   \
  X(tp_model_v1_t, to_device, 24)                 \
  X(tp_model_v1_t, set_training, 32)              \
  X(tp_model_v1_t, visit_state, 40)               \
  X(tp_model_v1_t, forward, 48)                   \
  X(tp_model_v1_t, set_activation_checkpointing, 56) /* @since 1.1 */ \
  X(tp_model_v1_t, layer_depths, 64)              /* @since 1.4 */ \
  X(tp_model_v1_t, set_batchnorm_frozen, 72)      /* @since 1.4 */ \
  X(tp_model_v1_t, check_graph_capture, 80)       /* @since 1.8 */ \
  X(tp_model_v1_t, after_optimizer_step, 88)      /* @since 1.14 */ \
  X(tp_model_v1_t, set_batchnorm_frozen_at, 96)   /* @since 1.14 */ \
  X(tp_layer_depth_t, prefix, 0)                  /* @since 1.4 */ \
  X(tp_layer_depth_t, depth, 8)                   /* @since 1.4 */ \
  X(tp_loss_v1_t, struct_size, 0)                 \
  X(tp_loss_v1_t, create, 8)                      \
  X(tp_loss_v1_t, destroy, 16)                    \
  X(tp_loss_v1_t, forward, 24)                    \
  X(tp_loss_v1_t, terms, 32)                      /* @since 1.3 */ \
  X(tp_loss_v1_t, describe, 40)                   /* @since 1.9 */ \
  X(tp_field_contract_t, struct_size, 0)          /* @since 1.9 */ \
  X(tp_field_contract_t, kind, 4)                 /* @since 1.9 */ \
  X(tp_field_contract_t, field, 8)                /* @since 1.9 */ \
  X(tp_field_contract_t, class_count, 16)         /* @since 1.9 */ \
  X(tp_loss_description_t, struct_size, 0)        /* @since 1.9 */ \
  X(tp_loss_description_t, contracts, 8)          /* @since 1.9 */ \
  X(tp_loss_description_t, contract_count, 16)    /* @since 1.9 */ \
  X(tp_loss_description_t, floored_terms, 24)     /* @since 1.9 */ \
  X(tp_loss_description_t, floored_term_count, 32) /* @since 1.9 */ \
  X(tp_loss_description_t, overfit_fraction, 40)  /* @since 1.9 */ \
  X(tp_metric_v1_t, struct_size, 0)               \
  X(tp_metric_v1_t, create, 8)                    \
  X(tp_metric_v1_t, destroy, 16)                  \
  X(tp_metric_v1_t, to_device, 24)                \
  X(tp_metric_v1_t, reset, 32)                    \
  X(tp_metric_v1_t, update, 40)                   \
  X(tp_metric_v1_t, visit_state, 48)              \
  X(tp_metric_v1_t, compute, 56)                  \
  X(tp_metric_v1_t, visit_gathered_state, 64)     /* @since 1.7 */ \
  X(tp_batch_transform_v1_t, struct_size, 0)      /* @since 1.3 */ \
  X(tp_batch_transform_v1_t, create, 8)           /* @since 1.3 */ \
  X(tp_batch_transform_v1_t, destroy, 16)         /* @since 1.3 */ \
  X(tp_batch_transform_v1_t, apply, 24)           /* @since 1.3 */

/* X(type, minor, sizeof in that minor, first member appended after it): structs that grew, with
 * the struct_size a producer built against that older minor writes. Hosts must keep accepting
 * that size (a 1.0 plugin keeps loading), and the member appended next must start exactly there,
 * so that it reads as absent from such a producer. */
#define TP_ABI_V1_GROWN(X)                                \
  X(tp_model_v1_t, 0, 56, set_activation_checkpointing)   \
  X(tp_loss_v1_t, 2, 32, terms)                           \
  X(tp_model_v1_t, 3, 64, layer_depths)                   \
  X(tp_dataset_v1_t, 4, 48, prepare)                      \
  X(tp_dataset_v1_t, 5, 56, field_batching)              \
  X(tp_metric_v1_t, 6, 64, visit_gathered_state)          \
  X(tp_model_v1_t, 7, 80, check_graph_capture)           \
  X(tp_loss_v1_t, 8, 40, describe)                        \
  X(tp_dataset_v1_t, 9, 64, sample_groups)               \
  X(tp_dataset_v1_t, 10, 72, encoded_images)             \
  X(tp_worker_ctx_t, 10, 32, encoded_images)              \
  X(tp_dataset_v1_t, 11, 80, class_names)                \
  X(tp_dataset_v1_t, 12, 88, sample_keys)                \
  X(tp_model_v1_t, 13, 88, after_optimizer_step)

/* X(constant, value): the released values of the ABI's integer constants. Plugins compile them in,
 * so renumbering one is as breaking as moving a member. */
#define TP_ABI_V1_CONSTANTS(X)                                                                    \
  X(TP_ABI_MAJOR, 1)                                                                              \
  X(TP_OK, 0) X(TP_ERR_INVALID_ARGUMENT, 1) X(TP_ERR_CONFIG, 2) X(TP_ERR_UNSUPPORTED, 3)          \
  X(TP_ERR_IO, 4) X(TP_ERR_OUT_OF_MEMORY, 5) X(TP_ERR_DEVICE, 6) X(TP_ERR_INTERNAL, 7)            \
  X(TP_ERR_OUT_OF_RANGE, 8)                                                                       \
  X(TP_LOG_DEBUG, 0) X(TP_LOG_INFO, 1) X(TP_LOG_WARNING, 2) X(TP_LOG_ERROR, 3)                    \
  X(TP_LOG_PLUGIN_MISBEHAVING, 4)                                                                 \
  X(TP_KIND_DATASET, 1) X(TP_KIND_CALLBACK, 2) X(TP_KIND_MODEL, 3) X(TP_KIND_LOSS, 4)             \
  X(TP_KIND_METRIC, 5) X(TP_KIND_BATCH_TRANSFORM, 6)                                              \
  X(TP_TIER_S, 1) X(TP_TIER_T, 2)                                                                 \
  X(TP_BUILD_NOT_TORCH, 0) X(TP_BUILD_CPU, 1) X(TP_BUILD_CUDA, 2)                                 \
  X(TP_DESCRIPTOR_SERIAL, 1)                                                                      \
  X(TP_CFG_BOOL, 1) X(TP_CFG_INT, 2) X(TP_CFG_FLOAT, 3) X(TP_CFG_STRING, 4)                       \
  X(TP_CFG_INT_ARRAY, 5) X(TP_CFG_FLOAT_ARRAY, 6) X(TP_CFG_STRING_ARRAY, 7) X(TP_CFG_PATH, 8)     \
  X(TP_EVENT_FIT_BEGIN, 1) X(TP_EVENT_FIT_END, 2) X(TP_EVENT_EPOCH_BEGIN, 3)                      \
  X(TP_EVENT_EPOCH_END, 4) X(TP_EVENT_STEP_BEGIN, 5) X(TP_EVENT_STEP_END, 6)                      \
  X(TP_EVENT_EVAL_END, 7) X(TP_EVENT_CHECKPOINT_SAVE, 8) X(TP_EVENT_CHECKPOINT_LOAD, 9)           \
  X(TP_EVENT_EXCEPTION, 10)                                                                       \
  X(TP_REQUEST_NONE, 0) X(TP_REQUEST_STOP, 1) X(TP_REQUEST_SAVE, 2)                               \
  X(TP_DTYPE_FLOAT32, 1) X(TP_DTYPE_FLOAT16, 2) X(TP_DTYPE_BFLOAT16, 3) X(TP_DTYPE_FLOAT64, 4)    \
  X(TP_DTYPE_INT64, 5) X(TP_DTYPE_INT32, 6) X(TP_DTYPE_UINT8, 7) X(TP_DTYPE_BOOL, 8)              \
  X(TP_DEVICE_CPU, 1) X(TP_DEVICE_CUDA, 2)                                                        \
  X(TP_BATCH_STACK, 0) X(TP_BATCH_PAD, 1) X(TP_BATCH_RAGGED, 2)                                  \
  X(TP_CONTRACT_BOXES_XYXY, 1) X(TP_CONTRACT_CLASS_IDS, 2)                                       \
  X(TP_REDUCE_SUM, 0) X(TP_REDUCE_MEAN, 1) X(TP_REDUCE_MAX, 2)

/* The DLPack types datasets hand over (tp/dlpack.h, pinned; tp_field_t carries a DLManagedTensor*).
 * Checked like our own structs, and by dlpack_order_*.cpp in translation units where LibTorch's
 * <ATen/dlpack.h> came first: whichever copy defines them, these are the bytes the ABI means. */
#define TP_ABI_V1_DLPACK_SIZES(X) \
  X(DLDevice, 8, 4)               \
  X(DLDataType, 4, 2)             \
  X(DLTensor, 48, 8)              \
  X(DLManagedTensor, 64, 8)

#define TP_ABI_V1_DLPACK_OFFSETS(X)    \
  X(DLDevice, device_type, 0)          \
  X(DLDevice, device_id, 4)            \
  X(DLDataType, code, 0)               \
  X(DLDataType, bits, 1)               \
  X(DLDataType, lanes, 2)              \
  X(DLTensor, data, 0)                 \
  X(DLTensor, device, 8)               \
  X(DLTensor, ndim, 16)                \
  X(DLTensor, dtype, 20)               \
  X(DLTensor, shape, 24)               \
  X(DLTensor, strides, 32)             \
  X(DLTensor, byte_offset, 40)         \
  X(DLManagedTensor, dl_tensor, 0)     \
  X(DLManagedTensor, manager_ctx, 48)  \
  X(DLManagedTensor, deleter, 56)

#define TP_ABI_V1_DLPACK_CONSTANTS(X)                                                  \
  X(kDLCPU, 1) X(kDLInt, 0) X(kDLUInt, 1) X(kDLFloat, 2) X(kDLOpaqueHandle, 3) X(kDLBfloat, 4)

#endif /* TP_TESTS_ABI_V1_LAYOUT_H */
