// Which host wrote an export, as its metadata says (host/export_metadata.h's writer_metadata):
// the metadata format this library reads, and the LibTorch and plugin ABI the export's build had.
#pragma once

#include <map>
#include <string>

#include "tp/framework/util/log.h"

namespace tp::infer::detail {

/// The `torchhost.format` this library reads: the one `host export` of this tree writes
/// (host/export_metadata.h, kExportFormat). A format is raised when a key changes its meaning or
/// is removed, so an export of another format may mean something else by a key read here.
inline constexpr int kReadableExportFormat = 1;

/// Throws Error (Setup) when `metadata` holds a `torchhost.format` other than
/// kReadableExportFormat, naming both and what to do. An export without the key (written before
/// it existed) is read as format 1.
void check_export_format(const std::map<std::string, std::string>& metadata, const std::string& export_file);

/// Warns through `log` when the export's `torchhost.libtorch` or `torchhost.plugin_abi` is newer
/// than this library's: its plugins may need what this LibTorch or ABI lacks (they are refused at
/// load when they do), and its numbers may differ from this build's. Values that are no version
/// (missing, not digits and dots) are passed over.
void warn_about_export_versions(Logger& log, const std::map<std::string, std::string>& metadata,
                                const std::string& export_file);

}  // namespace tp::infer::detail
