// The machine-readable reports of a benchmark run (`bench --report DIR`):
//   report.json      {"format": "specchat-bench-report", "version": 1, "meta", "records",
//                     "waves", "aggregates", "skipped"}: every raw record plus the aggregates
//                     (aggregate.h), which recompute from the records;
//   per_request.csv  one row per RequestRecord (lists joined with ';');
//   summary.csv      one row per GroupAggregate.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/cli/bench/aggregate.h"
#include "app/cli/bench/records.h"

namespace specchat::bench {

nlohmann::json report_json(const BenchRun& run, const Aggregates& agg, const std::vector<std::string>& skipped);
std::string per_request_csv(const BenchRun& run);
std::string summary_csv(const Aggregates& agg);

// A report.json read back: the run and the stored aggregates as written. Throws
// std::runtime_error naming the file when it is unreadable or not a version-1 report, nests
// deeper than kMaxReportDepth, or has a record name (config, category, tier, prompt id) longer
// than kMaxReportName characters (a legend of that length makes Qt Charts take gigabytes).
inline constexpr int kMaxReportDepth = 64;
inline constexpr size_t kMaxReportName = 256;
struct LoadedReport {
  BenchRun run;
  nlohmann::json aggregates;
};
LoadedReport load_report(const std::string& path);
// The same from the report's text (a run saved in the app's database); `name` names it in errors.
LoadedReport parse_report(const std::string& text, const std::string& name);

// Writes `text` to `path`. Throws std::runtime_error naming the path on failure.
void write_text_file(const std::string& path, const std::string& text);

}  // namespace specchat::bench
