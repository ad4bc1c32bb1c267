// SHA-256 (engine/drafters/sha256.h) against the FIPS 180-2 appendix B vectors, incremental
// updates in uneven pieces, and the file reader against the in-memory digest.
#include <catch2/catch.hpp>

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
