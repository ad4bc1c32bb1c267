// SHA-256 (FIPS 180-4) of a file, for binding a drafter to the exact target file it was trained
// against (specchat.target.sha256, docs/design/target-feature-drafters.md).
//
// Our own implementation rather than libcrypto's: the engine library must build on the bare GPU
// machine, which has no Debian packages (no libssl-dev); storage/ (which uses OpenSSL's EVP for
// the conversation store) is optional for that reason. Checked against the FIPS 180-2 test
// vectors and Python's hashlib in tests/engine/drafters/test_sha256.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace specchat {

// Incremental SHA-256: update() any number of times, then hex() once (64 lowercase hex digits).
class Sha256 {
 public:
  Sha256();
  void update(std::span<const uint8_t> bytes);
  std::string hex();

 private:
  void block(const uint8_t* p);  // one 64-byte block
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t n_buf_ = 0;
  uint64_t n_bytes_ = 0;
};

// SHA-256 of `bytes`, lowercase hex.
std::string sha256_hex(std::span<const uint8_t> bytes);

// SHA-256 of the file at `path` as 64 lowercase hex digits, read in 1 MiB chunks (a multi-GB
// model never sits in memory). Computed by libcrypto's EVP digest when the build has OpenSSL (it
// uses the CPU's SHA extensions: 1.7 GB/s against this file's 0.48 GB/s on a Zen 4 core), by
// Sha256 otherwise; both give the same digest. Memoised for the process, keyed by the file's
// device, inode, size and modification time (ns): binding a block drafter, an MTP head and a PIPO
// release to one multi-GB target reads it once; a file rewritten or replaced is hashed again.
// Throws std::runtime_error naming the file when it cannot be opened, stat'ed or read.
std::string sha256_file_hex(const std::string& path);

// Which implementation computes a file's digest (sha256_file_hex uses `fastest`).
enum class Sha256Impl {
  fastest,   // libcrypto when the build has it, else portable
  portable,  // Sha256 (this file), always available
};
// sha256_file_hex without the memo (tests, benchmarks). Errors as sha256_file_hex.
std::string sha256_file_hex_uncached(const std::string& path, Sha256Impl impl = Sha256Impl::fastest);
// Whether `fastest` is libcrypto in this build.
bool sha256_has_libcrypto();
// Digests sha256_file_hex computed (not served from the memo) since the process started.
uint64_t sha256_file_hashes_computed();

}  // namespace specchat
