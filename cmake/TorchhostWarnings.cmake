# tp_enable_warnings(<target>): the warning set of all our own targets (-Werror when
# TP_WARNINGS_AS_ERRORS). Third-party headers come in as SYSTEM includes, so they do not trip it.
function(tp_enable_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter
    $<$<BOOL:${TP_WARNINGS_AS_ERRORS}>:-Werror>)
endfunction()
