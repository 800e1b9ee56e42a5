// Removing a directory tree the host made, without ever following a link in it: the run
// directory's rule for creating files (exclusively, never through a link; docs/hardening.md,
// section 15) applied to removal. std::filesystem::remove_all works by path, so a directory swapped
// for a link between its listing and its removal would be followed.
#pragma once

namespace tp {

/// Removes `name` in the directory open as `dir_fd`: a file or a link by unlinkat (a link itself,
/// never its target); a directory by opening it with O_NOFOLLOW | O_DIRECTORY relative to
/// `dir_fd`, removing its entries the same way through that descriptor, then rmdir. At most
/// `depth` levels are entered (deeper trees are left, and false returned). True when `name` is
/// gone (or was absent); false when something could not be removed (what could, is).
bool remove_tree_at(int dir_fd, const char* name, int depth = 16);

}  // namespace tp
