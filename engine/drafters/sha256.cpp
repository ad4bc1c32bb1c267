#include "engine/drafters/sha256.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <vector>

#ifdef SPECCHAT_HAVE_OPENSSL
#include <openssl/evp.h>
#endif

namespace specchat {

namespace {

constexpr uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

}  // namespace

Sha256::Sha256() : h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19} {}

void Sha256::block(const uint8_t* p) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i) {
    w[i] = (static_cast<uint32_t>(p[4 * i]) << 24) | (static_cast<uint32_t>(p[4 * i + 1]) << 16) |
           (static_cast<uint32_t>(p[4 * i + 2]) << 8) | static_cast<uint32_t>(p[4 * i + 3]);
  }
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
  for (int i = 0; i < 64; ++i) {
    const uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
    const uint32_t ch = (e & f) ^ (~e & g);
    const uint32_t t1 = h + S1 + ch + kK[i] + w[i];
    const uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
    const uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
    const uint32_t t2 = S0 + maj;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h_[0] += a;
  h_[1] += b;
  h_[2] += c;
  h_[3] += d;
  h_[4] += e;
  h_[5] += f;
  h_[6] += g;
  h_[7] += h;
}

void Sha256::update(std::span<const uint8_t> bytes) {
  const uint8_t* p = bytes.data();
  size_t n = bytes.size();
  n_bytes_ += n;
  if (n_buf_ > 0) {
    const size_t take = std::min(n, 64 - n_buf_);
    std::memcpy(buf_ + n_buf_, p, take);
    n_buf_ += take;
    p += take;
    n -= take;
    if (n_buf_ < 64) return;
    block(buf_);
    n_buf_ = 0;
  }
  for (; n >= 64; p += 64, n -= 64) block(p);
  if (n > 0) std::memcpy(buf_, p, n);
  n_buf_ = n;
}

std::string Sha256::hex() {
  // Padding: 0x80, zeros to 56 mod 64, then the message length in bits, big endian.
  const uint64_t bits = n_bytes_ * 8;
  uint8_t pad[72] = {0x80};
  const size_t n_pad = (n_buf_ < 56 ? 56 : 120) - n_buf_;
  for (int i = 0; i < 8; ++i) pad[n_pad + static_cast<size_t>(i)] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  update(std::span<const uint8_t>(pad, n_pad + 8));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (uint32_t v : h_) {
    for (int s = 28; s >= 0; s -= 4) out += kHex[(v >> s) & 0xf];
  }
  return out;
}

std::string sha256_hex(std::span<const uint8_t> bytes) {
  Sha256 s;
  s.update(bytes);
  return s.hex();
}

namespace {

std::string hex_of(const unsigned char* md, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 0xf];
  }
  return out;
}

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

File open_for_hash(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw std::runtime_error("cannot open " + path + " to compute its SHA-256");
  return f;
}

// Feeds the file to `update` in 1 MiB chunks.
template <class Update>
void read_chunks(const std::string& path, std::FILE* f, Update update) {
  std::vector<uint8_t> buf(1 << 20);
  for (;;) {
    const size_t n = std::fread(buf.data(), 1, buf.size(), f);
    if (n > 0) update(buf.data(), n);
    if (n < buf.size()) break;
  }
  if (std::ferror(f)) throw std::runtime_error("read error while hashing " + path);
}

std::string portable_file(const std::string& path) {
  File f = open_for_hash(path);
  Sha256 s;
  read_chunks(path, f.get(), [&](const uint8_t* p, size_t n) { s.update(std::span<const uint8_t>(p, n)); });
  return s.hex();
}

#ifdef SPECCHAT_HAVE_OPENSSL
std::string libcrypto_file(const std::string& path) {
  File f = open_for_hash(path);
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("cannot hash " + path + ": libcrypto's SHA-256 is unavailable");
  }
  read_chunks(path, f.get(), [&](const uint8_t* p, size_t n) {
    if (EVP_DigestUpdate(ctx.get(), p, n) != 1) throw std::runtime_error("SHA-256 update failed for " + path);
  });
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), md, &len) != 1) throw std::runtime_error("SHA-256 final failed for " + path);
  return hex_of(md, len);
}
#endif

// The memo: one entry per file identity; a changed size or time is another key.
struct FileKey {
  uint64_t dev, ino, size;
  int64_t mtime_ns;
  bool operator==(const FileKey&) const = default;
  bool operator<(const FileKey& o) const {
    return std::tie(dev, ino, size, mtime_ns) < std::tie(o.dev, o.ino, o.size, o.mtime_ns);
  }
};
std::mutex g_memo_mu;
std::map<FileKey, std::string> g_memo;
std::atomic<uint64_t> g_computed{0};

FileKey key_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw std::runtime_error("cannot open " + path + " to compute its SHA-256");
  return FileKey{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size),
                 static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

}  // namespace

bool sha256_has_libcrypto() {
#ifdef SPECCHAT_HAVE_OPENSSL
  return true;
#else
  return false;
#endif
}

std::string sha256_file_hex_uncached(const std::string& path, Sha256Impl impl) {
#ifdef SPECCHAT_HAVE_OPENSSL
  if (impl == Sha256Impl::fastest) return libcrypto_file(path);
#endif
  (void)impl;
  return portable_file(path);
}

uint64_t sha256_file_hashes_computed() { return g_computed.load(); }

std::string sha256_file_hex(const std::string& path) {
  const FileKey before = key_of(path);
  {
    std::lock_guard<std::mutex> lk(g_memo_mu);
    const auto it = g_memo.find(before);
    if (it != g_memo.end()) return it->second;
  }
  // Hashed outside the lock (seconds for a large file); two threads may hash one file at once.
  std::string hex = sha256_file_hex_uncached(path);
  g_computed.fetch_add(1);
  // Kept only if the file did not change while it was read.
  if (key_of(path) == before) {
    std::lock_guard<std::mutex> lk(g_memo_mu);
    g_memo[before] = hex;
  }
  return hex;
}

}  // namespace specchat
