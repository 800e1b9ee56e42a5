# The installed product: `cmake --install build --prefix P` lays out
#   P/bin/host                          the host
#   P/lib/torchhost/plugins/*.so        the built-in plugins (TP_INSTALL_PLUGIN_DIR)
#   P/share/torchhost/configs/          reference.toml (every key) and the example configs (TP_INSTALL_CONFIG_DIR)
#   P/share/doc/torchhost/              README.md and docs/
#   P/include, P/lib/cmake/torchhost, P/share/torchhost/{README.md,templates/}   the plugin SDK
#   P/lib/libtorchhost_infer.so*, P/include/tp/infer/   the inference library (torchhost::infer)
#   P/share/torchhost/templates/infer_classify/         the program to copy that uses it
# The host finds its plugins and reference.toml relative to its own executable
# (framework/src/config/install_layout.cpp), so P can be moved anywhere. Install components, each
# usable alone (tests/package/components.sh): `sdk` (what a plugin author needs,
# plugin_api/CMakeLists.txt; installable after any build) and `runtime` (the rest, which needs the
# host and every built-in plugin built), whose inference library comes with what a program needs to
# compile and link against it: the ABI headers its headers include (tp/status.h, tp/macros.h), the
# package config (torchhostConfig.cmake, also in `sdk`) and the infer_classify template. Files in
# both components are the same files; a full install writes them once.
#
# RPATH: the host links the framework statically and loads plugins by path, so the installed host,
# plugins and inference library keep only LibTorch's lib/, absolute (LibTorch is not copied), and
# the directories of what else they link from outside this tree; a program linking the library
# finds it by its own RUNPATH (CMake's install tree or the user's), the library finds LibTorch. LibTorch's
# is named explicitly: a project venv (.venv, scripts/setup) lies inside the source tree, whose
# directories INSTALL_RPATH_USE_LINK_PATH leaves out. They are built with that RUNPATH too
# (BUILD_WITH_INSTALL_RPATH): a build RUNPATH that differs is padded with ':' so that install can
# rewrite it in place, and an empty RUNPATH entry makes the dynamic linker search the working
# directory (build/bin/host, run in a directory someone else can write, would load a planted
# libtomlplusplus.so.3); and install then copies the files as they are, so an installed plugin's
# SHA-256 is the one its training recorded (the inference library warned of every plugin).
get_filename_component(_tp_torch_lib "${Torch_DIR}/../../../lib" ABSOLUTE)
set(_tp_install_rpath "${_tp_torch_lib}")
# nvJPEG (data.decode = "gpu", cmake/TorchhostGpuDecode.cmake) is no dependency of LibTorch's: its
# directory is named too (the nvidia-nvjpeg wheel's lies inside the source tree where the venv does).
if(TP_GPU_DECODE_BUILT)
  get_filename_component(_tp_nvjpeg_dir "${TP_NVJPEG_LIBRARY}" DIRECTORY)
  list(APPEND _tp_install_rpath "${_tp_nvjpeg_dir}")
endif()
if(TARGET host)
  set_target_properties(host PROPERTIES INSTALL_RPATH "${_tp_install_rpath}" INSTALL_RPATH_USE_LINK_PATH TRUE
                                            BUILD_WITH_INSTALL_RPATH TRUE)
  install(TARGETS host RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
endif()
# The inference library (framework/infer), with its headers: component `runtime`, as it needs
# building, and an export set of its own (torchhostInferTargets.cmake), which the package config
# includes where it is installed; an `sdk`-only install has the plugin SDK without it. The runtime
# also gets the two ABI headers the library's headers include, the package config
# (plugin_api/CMakeLists.txt writes it) and the template that uses the library (deployment trial
# F1, F13: a runtime-only install had headers that did not compile and no torchhostConfig.cmake).
if(TARGET tp_infer)
  set_target_properties(tp_infer PROPERTIES INSTALL_RPATH "${_tp_install_rpath}" INSTALL_RPATH_USE_LINK_PATH TRUE
                                            BUILD_WITH_INSTALL_RPATH TRUE)
  install(TARGETS tp_infer EXPORT torchhostInferTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT runtime)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/framework/infer/include/tp/infer DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tp
          COMPONENT runtime)
  install(EXPORT torchhostInferTargets NAMESPACE torchhost:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/torchhost
          COMPONENT runtime)
  install(FILES ${PROJECT_SOURCE_DIR}/plugin_api/include/tp/status.h ${PROJECT_SOURCE_DIR}/plugin_api/include/tp/macros.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tp COMPONENT runtime)
  install(FILES ${TORCHHOST_PACKAGE_CONFIG_FILES} DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/torchhost COMPONENT runtime)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/plugins/template/infer_classify
          DESTINATION ${CMAKE_INSTALL_DATADIR}/torchhost/templates COMPONENT runtime)
endif()
get_property(_tp_builtin_plugins GLOBAL PROPERTY TP_BUILTIN_PLUGINS)
foreach(_plugin IN LISTS _tp_builtin_plugins)
  set_target_properties(${_plugin} PROPERTIES INSTALL_RPATH "${_tp_install_rpath}" INSTALL_RPATH_USE_LINK_PATH TRUE
                                            BUILD_WITH_INSTALL_RPATH TRUE)
  install(TARGETS ${_plugin} LIBRARY DESTINATION ${TP_INSTALL_PLUGIN_DIR} COMPONENT runtime)
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${TP_INSTALL_CONFIG_DIR} COMPONENT runtime)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT runtime)
