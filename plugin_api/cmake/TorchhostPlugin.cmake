# torchhost_add_plugin(<name> TIER S|T SOURCES <src>... [LINK <lib>...] [OUTPUT_DIRECTORY <dir>])
#
# LINK takes targets and libraries; an OpenCV module named as OpenCV's own package names it
# (opencv_core, opencv_imgproc, opencv_imgcodecs, ...) is found here when no such target exists yet,
# with its headers (torchhost_find_opencv, TorchhostOpenCV.cmake): no find_package(OpenCV) or include
# directory of your own, and Debian's per-module -dev packages are enough.
#
# Builds a plugin library `<name>.so` (no "lib" prefix: the file name is the plugin name) as a
# MODULE with hidden visibility, a version script that exports only `tp_entry`, and -z defs so an
# unresolved symbol fails the link instead of the run. Tier T plugins link LibTorch (found by
# torchhost_find_torch: the CPU or CUDA build, and the C++ standard it requires) and get the
# build-fingerprint define; Tier S plugins must not link LibTorch, which is checked when the
# directory is done configuring. Out of tree, find_package(torchhost) has already made Release the
# build type when none was set (torchhostConfig.cmake).
#
# RUNPATH (docs/plugin_sdk.md, "Shipping a plugin with shared libraries of its own"): a plugin
# that LINKs a shared library target of its own project gets INSTALL_RPATH $ORIGIN/lib: install the
# plugin into a plugin directory and that library into lib/ below it, which the host does not scan
# (it loads every .so at a directory's top level only). Ship what `cmake --install` writes: the
# build tree's RUNPATH names the build directory. LibTorch needs no entry: the host has loaded it
# before any plugin. Set INSTALL_RPATH after the call for another layout.

include("${CMAKE_CURRENT_LIST_DIR}/TorchhostTorch.cmake") # torchhost_find_torch()
include("${CMAKE_CURRENT_LIST_DIR}/TorchhostOpenCV.cmake") # torchhost_find_opencv()

# Cached so the path is visible from every directory of the project, whichever one included this.
set(_TORCHHOST_PLUGIN_MAP "${CMAKE_CURRENT_LIST_DIR}/torchhost_plugin.map" CACHE INTERNAL "torchhost plugin version script")

function(_torchhost_check_tier_s target)
  get_target_property(_libs ${target} LINK_LIBRARIES)
  foreach(_lib IN LISTS _libs)
    if(_lib MATCHES "^(torch|torch_cpu|torch_cuda|c10|c10_cuda)$" OR _lib MATCHES "libtorch|libc10")
      message(FATAL_ERROR "torchhost plugin '${target}' is Tier S but links LibTorch (${_lib}). "
                          "Tier S plugins stay LibTorch-free so they survive LibTorch upgrades; "
                          "declare it TIER T or drop the link.")
    endif()
  endforeach()
endfunction()

function(torchhost_add_plugin name)
  cmake_parse_arguments(ARG "" "TIER;OUTPUT_DIRECTORY" "SOURCES;LINK" ${ARGN})
  if(NOT ARG_TIER MATCHES "^(S|T)$")
    message(FATAL_ERROR "torchhost_add_plugin(${name}): TIER must be S or T")
  endif()
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "torchhost_add_plugin(${name}): SOURCES is empty")
  endif()
  add_library(${name} MODULE ${ARG_SOURCES})
  set(_opencv_modules)
  foreach(_lib IN LISTS ARG_LINK)
    if(_lib MATCHES "^opencv_([a-z0-9_]+)$" AND NOT TARGET ${_lib})
      list(APPEND _opencv_modules ${CMAKE_MATCH_1})
    endif()
  endforeach()
  if(_opencv_modules)
    torchhost_find_opencv(${_opencv_modules})
  endif()
  # A C-only project (project(x LANGUAGES C)) gets the C11 headers alone: it has no C++ compiler
  # to give cxx_std_17 to.
  get_property(_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("CXX" IN_LIST _languages)
    target_link_libraries(${name} PRIVATE torchhost::plugin_api_cpp ${ARG_LINK})
    target_compile_features(${name} PRIVATE cxx_std_17)
  else()
    target_link_libraries(${name} PRIVATE torchhost::plugin_api ${ARG_LINK})
  endif()
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS "${_TORCHHOST_PLUGIN_MAP}")
  target_link_options(${name} PRIVATE "LINKER:--version-script=${_TORCHHOST_PLUGIN_MAP}" "LINKER:-z,defs")
  foreach(_lib IN LISTS ARG_LINK)
    if(TARGET ${_lib})
      get_target_property(_type ${_lib} TYPE)
      get_target_property(_imported ${_lib} IMPORTED)
      if(_type STREQUAL "SHARED_LIBRARY" AND NOT _imported)
        set_target_properties(${name} PROPERTIES INSTALL_RPATH "$ORIGIN/lib")
      endif()
    endif()
  endforeach()
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  elseif(DEFINED TORCHHOST_PLUGIN_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${TORCHHOST_PLUGIN_OUTPUT_DIRECTORY}")
  endif()
  if(ARG_TIER STREQUAL "T")
    # LibTorch, CPU or CUDA build (TorchhostTorch.cmake); the plugin is compiled in the C++ standard
    # that LibTorch's headers require (C++20 from LibTorch 2.14 on), never below the SDK's C++17.
    torchhost_find_torch()
    target_link_libraries(${name} PRIVATE ${TORCH_LIBRARIES})
    target_compile_features(${name} PRIVATE cxx_std_${TORCHHOST_TORCH_CXX_STANDARD})
    target_compile_definitions(${name} PRIVATE TP_PLUGIN_TIER_T=1 TP_TORCH_DEVICE_BUILD=${TORCHHOST_TORCH_DEVICE_BUILD})
    if(COMMAND tp_use_torch_pch) # inside the torchhost tree: its precompiled LibTorch headers
      tp_use_torch_pch(${name})
    endif()
  else()
    cmake_language(EVAL CODE "cmake_language(DEFER CALL _torchhost_check_tier_s [[${name}]])")
  endif()
endfunction()
