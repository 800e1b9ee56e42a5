# The linker of this tree's executables and plugins: LLVM's lld (Debian's `lld`, which
# scripts/setup installs) where the compiler accepts -fuse-ld=lld, else the toolchain's default.
# Why: every test executable, the host and most plugins link LibTorch, and GNU ld takes about
# 1.6 s for each of them here where lld takes 0.25 s (host, -O2 -g1, idle machine); CI links about
# 220 of them over its three trees (docs/build.md, "The linker"). TP_LINKER=default keeps GNU ld.
# Only this tree: the installed SDK's torchhost_add_plugin leaves a plugin author's linker alone.
set(TP_LINKER "lld" CACHE STRING "the linker for this tree: lld (when the compiler accepts -fuse-ld=lld) or default")
set_property(CACHE TP_LINKER PROPERTY STRINGS lld default)
if(TP_LINKER STREQUAL "lld")
  include(CheckLinkerFlag)
  check_linker_flag(CXX "-fuse-ld=lld" TP_HAVE_LLD)
  if(TP_HAVE_LLD)
    add_link_options(-fuse-ld=lld)
  else()
    message(STATUS "torchhost: lld not found; linking with the toolchain's default linker (apt-get install lld links faster)")
  endif()
endif()
