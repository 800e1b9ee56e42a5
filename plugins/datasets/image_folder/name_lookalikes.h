// Class names that print alike but differ in their bytes: the same letters composed (NFC: "é" as
// U+00E9) or decomposed (NFD: "e" then U+0301, as macOS file systems and some zip and rsync
// copies write names), or with an invisible character (a zero-width space, a byte-order mark).
// A held-out folder named so is refused with two lists that read the same on any terminal (data
// trial F9); this names the difference, code point by code point, and how to rename.
#pragma once

#include <string>
#include <vector>

namespace tp::image_folder {

/// "cafe<U+0301>": `name` with every code point outside printable ASCII written as <U+XXXX>
/// (bytes that are not UTF-8 as <0xNN>), so two names that print alike read apart.
std::string spelled_code_points(const std::string& name);

/// What to add to a refusal of class folders `missing` from a held-out folder and `extra` in it
/// (`where`: "val_root '/data/val'"), when some of them differ only in Unicode normalisation or
/// invisible characters: each such pair spelled with spelled_code_points, which side is
/// decomposed (NFD) and the command that renames it to composed (NFC) form (convmv), or which
/// invisible characters to remove. "" when no name of either list holds a combining mark or an
/// invisible character. Pairs are found for Latin letters (U+00C0 to U+00FF composed); other
/// names with combining marks get the general note.
std::string lookalike_note(const std::vector<std::string>& missing, const std::vector<std::string>& extra,
                           const std::string& where, const std::string& root, const std::string& held_out_root);

}  // namespace tp::image_folder
