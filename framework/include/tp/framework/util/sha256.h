// SHA-256 of a file, hex encoded, for provenance (engine/setup/provenance.h): which plugin binary a run
// or a checkpoint was made with. OpenSSL's libcrypto does the hashing.
#pragma once

#include <filesystem>
#include <string>

namespace tp {

/// The SHA-256 of `file`'s bytes as 64 lowercase hex digits. Reads in 1 MiB blocks (a 50 MB
/// plugin takes about 0.1 s). Throws tp::Error naming the file when it cannot be read.
/// Example:
///   const std::string digest = sha256_file("build/plugins/resnet.so");
std::string sha256_file(const std::filesystem::path& file);

}  // namespace tp
