# The compiler cache (docs/build.md, "ccache"). Included by the top-level CMakeLists.txt and by
# tests/fuzz's standalone build, so every tree CI builds caches the same way. Everything ccache is
# told comes with the launcher, through its environment, so no machine needs a ccache.conf of its
# own (Debian 12's ccache 4.7 has no `ccache key=value` form) and every checkout gets the same:
#
# - Checkouts share their work. CI compiles in a fresh clone at a new path, after the change was
#   built in the working checkout. ccache hashes the compile line, and ours names the checkout in
#   every -I, -include (the PCH) and source path, so no two checkouts would ever share an entry.
#   CCACHE_BASEDIR (the checkout) makes ccache rewrite those paths relative to the build directory
#   before hashing and compiling, and CCACHE_NOHASHDIR leaves the build directory out of the hash
#   of a -g compile: the only path an object then carries is its debug info's compilation
#   directory, which names the checkout that compiled it first. What must also hold for a hit
#   (docs/build.md): unity sources that include their files relatively (TP_UNITY needs CMake >= 4.0
#   for that: UNITY_BUILD_RELOCATABLE, set in the top-level CMakeLists.txt) and no absolute path in
#   a -D (the tests' paths live in one small library, tests/support/test_paths.cpp).
# - The PCH and the TUs that use one are cached only if ccache ignores what it cannot see through
#   a PCH (pch_defines: macros in it, time_macros: __TIME__ in it) and the PCH file's fresh
#   mtime/ctime, rewritten by every build (include_file_mtime/ctime).
# - The cache's size is the project's, not a machine's ccache.conf: CI's four trees take 0.49 GB
#   (compressed; docs/build.md, "ccache"), and the limit keeps several commits of each beside a
#   developer's one-file-per-TU tree, so preparing CI's trees never evicts what CI is about to read.
set(TP_CCACHE_MAXSIZE "10G" CACHE STRING "ccache's size limit for this build's compiles (CI's four trees: about 0.5 GB)")
find_program(TP_CCACHE ccache)
if(TP_CCACHE)
  get_filename_component(_tp_ccache_base "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
  set(_tp_ccache ${CMAKE_COMMAND} -E env
      CCACHE_BASEDIR=${_tp_ccache_base}
      CCACHE_NOHASHDIR=1
      CCACHE_MAXSIZE=${TP_CCACHE_MAXSIZE}
      CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
      ${TP_CCACHE})
  set(CMAKE_C_COMPILER_LAUNCHER ${_tp_ccache})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${_tp_ccache})
endif()
