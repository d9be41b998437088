// Little-endian byte writer / bounds-checked reader for wire and file formats.
// ByteReader never reads past its input: a short or corrupt buffer throws cdt::Error(kProtocol)
// saying what was being read, so garbage from the network cannot crash the process.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "cdt/error.h"

namespace cdt {

class ByteWriter {
 public:
  explicit ByteWriter(std::string* out) : out_(out) {}
  void U8(uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void I64(int64_t v) { Raw(&v, 8); }
  // Length-prefixed (u32) bytes.
  void Bytes(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    out_->append(s.data(), s.size());
  }
  void Raw(const void* p, size_t n) { out_->append(static_cast<const char*>(p), n); }

 private:
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "formats are little-endian");
  std::string* out_;
};

class ByteReader {
 public:
  ByteReader(std::string_view in, const char* what) : in_(in), what_(what) {}
  uint8_t U8() { return Fixed<uint8_t>("u8"); }
  uint32_t U32() { return Fixed<uint32_t>("u32"); }
  uint64_t U64() { return Fixed<uint64_t>("u64"); }
  int64_t I64() { return Fixed<int64_t>("i64"); }
  std::string Bytes(size_t max_len) {
    uint32_t n = U32();
    if (n > max_len || n > in_.size() - pos_)
      Fail("byte string of " + std::to_string(n) + " bytes does not fit");
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  size_t remaining() const { return in_.size() - pos_; }
  void ExpectEnd() {
    if (remaining() != 0) Fail(std::to_string(remaining()) + " unexpected trailing bytes");
  }

 private:
  template <typename T>
  T Fixed(const char* name) {
    if (in_.size() - pos_ < sizeof(T)) Fail(std::string("truncated before ") + name);
    T v;
    std::memcpy(&v, in_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  [[noreturn]] void Fail(const std::string& why) {
    throw Error(ErrorCode::kProtocol, std::string("malformed ") + what_ + " at byte " +
                                          std::to_string(pos_) + ": " + why);
  }
  std::string_view in_;
  size_t pos_ = 0;
  const char* what_;
};

}  // namespace cdt
