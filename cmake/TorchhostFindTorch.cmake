# Finds LibTorch for the torchhost tree. Order: an explicit Torch_DIR or CMAKE_PREFIX_PATH entry
# (any LibTorch 2.x, CPU or CUDA), else the torch wheel in the project venv (.venv, made by
# scripts/setup), else the one of the python3 on PATH, else CMake's default search.
# torchhost_find_torch (plugin_api/cmake/TorchhostTorch.cmake, the SDK's own finder) does the rest:
# a CUDA build's toolkit and wheel libraries, the C++ standard LibTorch requires, one status line.
# Sets TP_TORCH_DEVICE_BUILD to 1 (CPU LibTorch) or 2 (CUDA LibTorch) for the build fingerprint,
# and TP_TORCH_CXX_STANDARD (17 or 20) for the plugins and the module PCH.
include(TorchhostTorch)
_torchhost_torch_root(_tp_named_torch)
if(NOT _tp_named_torch)
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
endif()
torchhost_find_torch()
set(TP_TORCH_DEVICE_BUILD ${TORCHHOST_TORCH_DEVICE_BUILD})
set(TP_TORCH_CXX_STANDARD ${TORCHHOST_TORCH_CXX_STANDARD})
