// Printable: text read from a file or the network, made safe to quote in a one-line error.
//
// A binary file passed where a CSV belongs once put its first 3 KB, raw, into the message about
// its header. Here bytes that are not printable ASCII or part of a valid UTF-8 character become
// \xNN (so a header in UTF-8, "gCO₂/kWh", stays as written), and past `max` bytes the text is
// cut at a character boundary with "..." after it.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace cdt {

// The length of the valid UTF-8 character of two or more bytes at s[i], or 0.
inline size_t Utf8CharAt(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  const size_t len = b >= 0xC2 && b <= 0xDF   ? 2
                     : b >= 0xE0 && b <= 0xEF ? 3
                     : b >= 0xF0 && b <= 0xF4 ? 4
                                              : 0;
  if (len == 0 || i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  return len;
}

inline std::string Printable(std::string_view text, size_t max = 80) {
  std::string out;
  size_t i = 0;
  while (i < text.size() && i < max) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b >= 0x20 && b < 0x7F) {
      out += text[i++];
    } else if (const size_t len = Utf8CharAt(text, i); len > 0) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02X", b);
      out += hex;
      ++i;
    }
  }
  if (i < text.size()) out += "...";
  return out;
}

}  // namespace cdt
