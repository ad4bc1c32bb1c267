// sha256_file (see conversation_store.h): OpenSSL's libcrypto EVP digest over the file, read in
// fixed-size chunks so a multi-GB model file never sits in memory.
#include <openssl/evp.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "storage/conversation_store.h"

namespace specchat {

std::string sha256_file(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw StorageError("io", "cannot open " + path + " to compute its SHA-256");
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1)
    throw StorageError("io", "SHA-256 unavailable in libcrypto");
  // 256 KiB: large enough that the per-call overhead vanishes, small enough for any thread.
  std::vector<unsigned char> buf(256 * 1024);
  for (;;) {
    const size_t n = std::fread(buf.data(), 1, buf.size(), f.get());
    if (n > 0 && EVP_DigestUpdate(ctx.get(), buf.data(), n) != 1)
      throw StorageError("io", "SHA-256 update failed for " + path);
    if (n < buf.size()) break;
  }
  if (std::ferror(f.get())) throw StorageError("io", "read error while hashing " + path);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx.get(), digest, &len) != 1)
    throw StorageError("io", "SHA-256 final failed for " + path);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 0xf];
  }
  return out;
}

}  // namespace specchat
