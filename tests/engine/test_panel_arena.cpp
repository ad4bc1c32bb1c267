// pack_in_panels (engine/panel_arena.h): which views it packs, in one arena, each once; what it
// leaves alone; and that a packed view's product is the row-major one's.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <random>
#include <vector>

#include "engine/panel_arena.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/linear_panels.h"

using namespace specchat;

namespace {

struct Mat16 {
  std::vector<uint16_t> bits;
  WeightView view;
  Mat16(DType t, int n_out, int n_in, uint64_t seed) : bits(static_cast<size_t>(n_out) * static_cast<size_t>(n_in)) {
    std::mt19937_64 g(seed);
    std::normal_distribution<float> u(0.0f, 0.5f);
    std::vector<float> f(bits.size());
    for (float& x : f) x = u(g);
    cpu::convert_from_f32(f.data(), bits.data(), t, static_cast<int64_t>(f.size()));
    view.data = bits.data();
    view.type = t;
    view.n_out = n_out;
    view.n_in = n_in;
  }
};

}  // namespace

TEST_CASE("pack_in_panels packs each 16-bit view once and leaves the others", "[unit][backend]") {
  Mat16 a(DType::f16, 37, 45, 1), b(DType::bf16, 16, 64, 2);
  std::vector<float> f32(static_cast<size_t>(20) * 8, 0.25f);
  WeightView c{f32.data(), DType::f32, 20, 8};
  const WeightView a0 = a.view, b0 = b.view, c0 = c;
  std::vector<const void*> released;
  // a twice, a null, an f32 view: a and b are packed, each once, in the order given.
  WeightView* views[] = {&a.view, nullptr, &c, &b.view, &a.view};
  const PanelArena arena = pack_in_panels(views, nullptr, [&](const WeightView& v) { released.push_back(v.data); });
  REQUIRE(arena.memory != nullptr);
  CHECK(arena.bytes >= cpu::panel_bytes(37, 45) + cpu::panel_bytes(16, 64));
  CHECK(released == std::vector<const void*>{a0.data, b0.data});
  CHECK(a.view.panels);
  CHECK(b.view.panels);
  CHECK(a.view.data != a0.data);
  CHECK(c.data == c0.data);
  CHECK_FALSE(c.panels);
  // Packed again: nothing left to pack.
  const PanelArena again = pack_in_panels(views, nullptr);
  CHECK(again.memory == nullptr);
  CHECK(again.bytes == 0);
  // The product on the panels is the row-major product's, up to summation order.
  for (const auto& [packed, plain] : {std::pair{a.view, a0}, std::pair{b.view, b0}}) {
    const int rows = 5;
    std::vector<float> x(static_cast<size_t>(rows) * static_cast<size_t>(plain.n_in)), y1(static_cast<size_t>(rows) * static_cast<size_t>(plain.n_out)), y2(y1.size());
    std::mt19937 g(3);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& v : x) v = u(g);
    linear_view(x.data(), packed, y1.data(), rows, nullptr, cpu::Activations::f32);
    cpu::linear_ref(x.data(), plain.data, plain.type, y2.data(), rows, plain.n_in, plain.n_out);
    for (size_t i = 0; i < y1.size(); ++i) CHECK(y1[i] == Approx(y2[i]).margin(1e-5));
  }
}

TEST_CASE("pack_in_panels with SPECCHAT_CPU_PACK=0 packs nothing and leaves the views", "[unit][backend]") {
  Mat16 a(DType::f16, 33, 40, 4);
  const WeightView a0 = a.view;
  WeightView* views[] = {&a.view};
  bool called = false;
  ::setenv("SPECCHAT_CPU_PACK", "0", 1);
  CHECK_FALSE(panel_packing_enabled());
  const PanelArena arena = pack_in_panels(views, nullptr, [&](const WeightView&) { called = true; });
  ::unsetenv("SPECCHAT_CPU_PACK");
  CHECK(panel_packing_enabled());
  CHECK(arena.memory == nullptr);
  CHECK_FALSE(called);
  CHECK(a.view.data == a0.data);
  CHECK_FALSE(a.view.panels);
}
