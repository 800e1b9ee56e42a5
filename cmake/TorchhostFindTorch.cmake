# Finds LibTorch. Order: an explicit Torch_DIR or CMAKE_PREFIX_PATH (any LibTorch 2.x), else the
# torch wheel in the project venv (.venv, made by scripts/setup), else the python3 on PATH.
# Sets TP_TORCH_DEVICE_BUILD to 1 (CPU LibTorch) or 2 (CUDA LibTorch) for the build fingerprint.
if(NOT Torch_DIR)
  find_package(Torch QUIET CONFIG)
endif()
if(NOT Torch_FOUND)
  foreach(_py "${CMAKE_SOURCE_DIR}/.venv/bin/python" python3)
    execute_process(
      COMMAND ${_py} -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
      OUTPUT_VARIABLE _torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
      RESULT_VARIABLE _rc)
    if(_rc EQUAL 0 AND _torch_prefix)
      list(APPEND CMAKE_PREFIX_PATH "${_torch_prefix}")
      break()
    endif()
  endforeach()
  find_package(Torch REQUIRED CONFIG)
endif()
if(Torch_VERSION VERSION_LESS 2.0)
  message(FATAL_ERROR "torchhost needs LibTorch 2.x; found ${Torch_VERSION} at ${Torch_DIR}")
endif()
if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES)
  set(TP_TORCH_DEVICE_BUILD 2)
else()
  set(TP_TORCH_DEVICE_BUILD 1)
endif()
message(STATUS "torchhost: LibTorch ${Torch_VERSION} (${Torch_DIR}), device build ${TP_TORCH_DEVICE_BUILD}")
