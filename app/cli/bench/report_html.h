// report.html: one self-contained page (no script, no stylesheet or image fetched, no URL) with
// the run's header (machine, models, settings, date, commit), its failures, the plots (charts.h):
// speedup by category with 95% CIs, τ and α by category, acceptance by draft position, system
// tokens/s against concurrency, TTFT and TPOT distributions, speedup against input length by
// tier; and the per-category table. The markup is also well-formed XML (checked by the tests).
#pragma once

#include <string>
#include <vector>

#include "app/cli/bench/aggregate.h"
#include "app/cli/bench/records.h"

namespace specchat::bench {

std::string report_html(const BenchRun& run, const Aggregates& agg, const std::vector<std::string>& skipped);

// Text with &, <, >, " escaped for HTML/XML.
std::string html_escape(const std::string& s);

}  // namespace specchat::bench
