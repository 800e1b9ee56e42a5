#include "name_lookalikes.h"

#include <cstdint>
#include <cstdio>

namespace tp::image_folder {
namespace {

// A byte that is not part of valid UTF-8, kept apart from every code point.
constexpr uint32_t kRawByte = 0x8000'0000U;

std::vector<uint32_t> code_points(const std::string& text) {
  std::vector<uint32_t> out;
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const int length = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    bool valid = length > 0 && i + static_cast<std::size_t>(length) <= text.size();
    uint32_t cp = length == 1 ? b : length == 2 ? (b & 0x1FU) : length == 3 ? (b & 0x0FU) : (b & 0x07U);
    for (int k = 1; valid && k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + static_cast<std::size_t>(k)]);
      valid = (next & 0xC0U) == 0x80U;
      cp = (cp << 6) | (next & 0x3FU);
    }
    out.push_back(valid ? cp : kRawByte | b);
    i += valid ? static_cast<std::size_t>(length) : 1;
  }
  return out;
}

// Combining marks (the diacritics a decomposed name carries after its letters).
bool is_combining(uint32_t cp) {
  return (cp >= 0x0300 && cp <= 0x036F) || (cp >= 0x1AB0 && cp <= 0x1AFF) || (cp >= 0x1DC0 && cp <= 0x1DFF) ||
         (cp >= 0x20D0 && cp <= 0x20FF) || (cp >= 0xFE20 && cp <= 0xFE2F);
}

// Characters that print as nothing: soft hyphen, zero-width space and joiners, direction marks,
// word joiner, byte-order mark.
bool is_invisible(uint32_t cp) {
  return cp == 0x00AD || (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2060 && cp <= 0x2064) || cp == 0xFEFF;
}

// The base letter of each composed Latin-1 letter U+00C0 to U+00FF ('.' for none: Æ, Ð, ×, Ø, Þ,
// ß and their lower-case kin): what is left of its decomposed form once the marks are dropped.
constexpr const char* kLatin1Base = "AAAAAA.CEEEEIIII.NOOOOO..UUUUY..aaaaaa.ceeeeiiii.nooooo..uuuuy.y";

// The name as it reads: marks and invisible characters dropped, composed Latin letters as their
// base letter. Two names of one skeleton print alike (or nearly: a mark on another letter).
std::vector<uint32_t> skeleton(const std::string& name) {
  std::vector<uint32_t> out;
  for (const uint32_t cp : code_points(name)) {
    if (is_combining(cp) || is_invisible(cp)) continue;
    out.push_back(cp >= 0xC0 && cp <= 0xFF && kLatin1Base[cp - 0xC0] != '.' ? static_cast<uint32_t>(kLatin1Base[cp - 0xC0])
                                                                             : cp);
  }
  return out;
}

bool holds(const std::string& name, bool (*test)(uint32_t)) {
  for (const uint32_t cp : code_points(name))
    if (test(cp)) return true;
  return false;
}

}  // namespace

std::string spelled_code_points(const std::string& name) {
  std::string out;
  for (const uint32_t cp : code_points(name)) {
    if (cp >= 0x20 && cp < 0x7F) {
      out += static_cast<char>(cp);
      continue;
    }
    char text[16];
    if ((cp & kRawByte) != 0)
      std::snprintf(text, sizeof text, "<0x%02X>", cp & 0xFFU);
    else
      std::snprintf(text, sizeof text, "<U+%04X>", cp);
    out += text;
  }
  return out;
}

std::string lookalike_note(const std::vector<std::string>& missing, const std::vector<std::string>& extra,
                           const std::string& where, const std::string& root, const std::string& held_out_root) {
  std::string pairs;
  bool decomposed_here = false, decomposed_in_root = false, invisible = false;
  for (const std::string& m : missing)
    for (const std::string& e : extra) {
      if (m == e || skeleton(m) != skeleton(e)) continue;
      pairs += (pairs.empty() ? "" : "; ") + std::string("'") + m + "' is " + spelled_code_points(m) + " in root and " +
               spelled_code_points(e) + " in " + where;
      decomposed_here = decomposed_here || holds(e, is_combining);
      decomposed_in_root = decomposed_in_root || holds(m, is_combining);
      invisible = invisible || holds(m, is_invisible) || holds(e, is_invisible);
    }
  if (pairs.empty()) {
    // No pair found (a letter beyond Latin-1): the names with marks or invisible characters alone.
    for (const std::string& name : extra) {
      const bool marks = holds(name, is_combining), hidden = holds(name, is_invisible);
      if (!marks && !hidden) continue;
      pairs += (pairs.empty() ? "" : "; ") + std::string("'") + name + "' is " + spelled_code_points(name) + " in " + where;
      decomposed_here = decomposed_here || marks;
      invisible = invisible || hidden;
    }
    for (const std::string& name : missing) {
      const bool marks = holds(name, is_combining), hidden = holds(name, is_invisible);
      if (!marks && !hidden) continue;
      pairs += (pairs.empty() ? "" : "; ") + std::string("'") + name + "' is " + spelled_code_points(name) + " in root";
      decomposed_in_root = decomposed_in_root || marks;
      invisible = invisible || hidden;
    }
    if (pairs.empty()) return "";
  }
  std::string note = ". Of these, the names that print alike differ in their code points: " + pairs + ".";
  if (decomposed_here || decomposed_in_root) {
    const std::string& folder = decomposed_here ? held_out_root : root;
    note += " Names with combining marks after their letters are decomposed (NFD) Unicode, as macOS file systems "
            "and some zip and rsync copies write them; the others are composed (NFC). Rename the decomposed ones to "
            "NFC, e.g. convmv -f utf8 -t utf8 --nfc -r --notest '" + folder + "' (without --notest it only shows "
            "what it would rename)";
    if (decomposed_here && decomposed_in_root) note += ", and the same on '" + root + "'";
    note += ".";
  }
  if (invisible)
    note += " Some hold invisible characters (<U+200B> zero-width space, <U+FEFF> byte-order mark, <U+00AD> soft "
            "hyphen, ...): remove them from the folder names.";
  return note;
}

}  // namespace tp::image_folder
