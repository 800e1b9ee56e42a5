/* torchhost plugin ABI: portability macros.
 *
 * Every plugin_api header includes this first. It gives the export attribute for the single
 * entry symbol, the extern "C" guards that let the same headers compile as C11 and C++, and a
 * must-use-result marker for status returns. */
#ifndef TP_MACROS_H
#define TP_MACROS_H

#if defined(__GNUC__) || defined(__clang__)
/* Marks the one symbol a plugin exports (`tp_entry`); everything else stays hidden. */
#define TP_EXPORT __attribute__((visibility("default")))
/* A status that is ignored is a bug: compilers warn when a caller drops one. */
#define TP_NODISCARD __attribute__((warn_unused_result))
#else
#define TP_EXPORT
#define TP_NODISCARD
#endif

#ifdef __cplusplus
#define TP_EXTERN_C_BEGIN extern "C" {
#define TP_EXTERN_C_END }
#else
#define TP_EXTERN_C_BEGIN
#define TP_EXTERN_C_END
#endif

#endif /* TP_MACROS_H */
