// Saved benchmark runs (schema 6, storage/store_bench_runs.cpp): saved, listed newest first
// without their reports, read back whole after a reopen, deleted; a report that is not a JSON
// object is refused and nothing is stored.
#include <catch2/catch.hpp>

#include "storage/conversation_store.h"
#include "storage_test_util.h"

using namespace specchat;
using namespace specchat::test;

TEST_CASE("bench runs: save, list without reports, read back after a reopen, delete", "[unit]") {
  TempDir dir;
  const std::string path = dir.file("bench.sqlite");
  int64_t first = 0, second = 0;
  {
    ConversationStore store(path);
    BenchRunRecord r;
    r.created_ms = 1'000;
    r.title = "qualitative \xC2\xB7 baseline, chain:k=4";
    r.suite = "qualitative";
    r.n_records = 22;
    r.failures = 1;
    r.report_json = R"({"format": "specchat-bench-report", "version": 1, "records": []})";
    first = store.save_bench_run(r);
    r.created_ms = 2'000;
    r.title = "later";
    second = store.save_bench_run(r);
    r.report_json = "[1, 2]";
    CHECK(storage_error_kind([&] { store.save_bench_run(r); }) == "invalid");
    r.report_json = "{ not json";
    CHECK(storage_error_kind([&] { store.save_bench_run(r); }) == "invalid");
    r.report_json = "{}";
    r.n_records = -1;
    CHECK(storage_error_kind([&] { store.save_bench_run(r); }) == "invalid");
  }
  ConversationStore store(path);
  const auto runs = store.bench_runs();
  REQUIRE(runs.size() == 2);  // the refused ones stored nothing
  CHECK(runs[0].id == second);  // newest first
  CHECK(runs[1].id == first);
  CHECK(runs[1].title == "qualitative \xC2\xB7 baseline, chain:k=4");
  CHECK(runs[1].n_records == 22);
  CHECK(runs[1].failures == 1);
  CHECK(runs[1].report_json.empty());  // listing does not read the reports
  const auto got = store.bench_run(first);
  REQUIRE(got);
  CHECK(got->report_json == R"({"format": "specchat-bench-report", "version": 1, "records": []})");
  CHECK_FALSE(store.bench_run(12345));
  store.delete_bench_run(first);
  store.delete_bench_run(12345);  // unknown: nothing happens
  CHECK(store.bench_runs().size() == 1);
}
