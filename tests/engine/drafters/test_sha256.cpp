// SHA-256 (engine/drafters/sha256.h) against the FIPS 180-2 appendix B vectors, incremental
// updates in uneven pieces, and the file reader against the in-memory digest.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "engine/drafters/sha256.h"
#include "test_paths.h"

using namespace specchat;

namespace {
std::span<const uint8_t> bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}
}  // namespace

TEST_CASE("sha256: FIPS 180-2 test vectors", "[unit][drafters]") {
  CHECK(sha256_hex(bytes("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex(bytes("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex(bytes("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // One million 'a', fed in pieces of uneven sizes (crossing block boundaries every way).
  Sha256 s;
  const std::string a(1000, 'a');
  size_t done = 0, piece = 1;
  while (done < 1000000) {
    const size_t n = std::min({piece, a.size(), 1000000 - done});
    s.update(bytes(a.substr(0, n)));
    done += n;
    piece = piece * 7 % 997 + 1;
  }
  CHECK(s.hex() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256: every length around the padding boundary agrees between one and many updates", "[unit][drafters]") {
  std::mt19937 g(5);
  std::vector<uint8_t> data(200);
  for (auto& b : data) b = static_cast<uint8_t>(g());
  for (size_t n = 0; n <= data.size(); ++n) {
    Sha256 s;
    for (size_t i = 0; i < n; ++i) s.update(std::span<const uint8_t>(&data[i], 1));
    INFO("length " << n);
    CHECK(s.hex() == sha256_hex(std::span<const uint8_t>(data.data(), n)));
  }
}

TEST_CASE("sha256_file_hex reads the whole file", "[unit][drafters]") {
  const std::string path = test::target_model();
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  const std::vector<uint8_t> all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(sha256_file_hex(path) == sha256_hex(all));
  CHECK_THROWS_AS(sha256_file_hex(path + ".does-not-exist"), std::runtime_error);
}

TEST_CASE("sha256 of a file: libcrypto and the portable digest agree at every chunk boundary", "[unit][drafters]") {
  if (!sha256_has_libcrypto()) WARN("this build has no OpenSSL: both names run the portable digest");
  const std::string path = (std::filesystem::temp_directory_path() / ("specchat-sha-" + std::to_string(::getpid()))).string();
  std::mt19937 g(11);
  for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{1} << 20, (size_t{1} << 20) + 1, size_t{3} << 20}) {
    std::vector<uint8_t> data(n);
    for (auto& b : data) b = static_cast<uint8_t>(g());
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(n));
    INFO("length " << n);
    const std::string want = sha256_hex(data);
    CHECK(sha256_file_hex_uncached(path, Sha256Impl::portable) == want);
    CHECK(sha256_file_hex_uncached(path, Sha256Impl::fastest) == want);
  }
  std::filesystem::remove(path);
  CHECK_THROWS_AS(sha256_file_hex_uncached(path, Sha256Impl::fastest), std::runtime_error);
  CHECK_THROWS_AS(sha256_file_hex_uncached(path, Sha256Impl::portable), std::runtime_error);
}

// Binding a block drafter, an MTP head and a PIPO release to one multi-GB target reads it once;
// a file that changes is read again.
TEST_CASE("sha256_file_hex reads a file once per process until it changes", "[unit][drafters]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("specchat-sha-memo-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string a = (dir / "a.bin").string(), b = (dir / "b.bin").string();
  std::ofstream(a, std::ios::binary) << "abc";
  std::ofstream(b, std::ios::binary) << "abd";
  const uint64_t n0 = sha256_file_hashes_computed();
  CHECK(sha256_file_hex(a) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_file_hex(a) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_file_hashes_computed() == n0 + 1);
  CHECK(sha256_file_hex(b) == sha256_hex(bytes("abd")));  // another file: its own digest
  CHECK(sha256_file_hashes_computed() == n0 + 2);
  // Rewritten in place with other bytes of the same size: its time moves, so it is read again.
  const auto t = fs::last_write_time(a);
  std::ofstream(a, std::ios::binary) << "xyz";
  fs::last_write_time(a, t + std::chrono::seconds(2));
  CHECK(sha256_file_hex(a) == sha256_hex(bytes("xyz")));
  CHECK(sha256_file_hashes_computed() == n0 + 3);
  // Replaced by another file (rename over it): another inode.
  std::ofstream(dir / "c.bin", std::ios::binary) << "abc";
  fs::rename(dir / "c.bin", a);
  CHECK(sha256_file_hex(a) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  fs::remove_all(dir);
  CHECK_THROWS_AS(sha256_file_hex(a), std::runtime_error);
}
