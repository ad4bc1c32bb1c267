// Checks shared by the report tests: HTML self-contained and well-formed, aggregates that
// recompute from the records of a report.json.
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "app/cli/bench/aggregate.h"
#include "app/cli/bench/report_files.h"
#ifdef SPECCHAT_BENCH_HTML
#include <QXmlStreamReader>
#endif

namespace specchat::test {
using namespace specchat::bench;

inline int count_of(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// No URL of any scheme that fetches (the page must render offline), at least `min_svgs` plots,
// and well-formed markup (every element closed: the page is also XML).
inline void check_html(const std::string& html, int min_svgs) {
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("http") == std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(count_of(html, "<svg") >= min_svgs);
  CHECK(count_of(html, "<svg") == count_of(html, "</svg>"));
#ifdef SPECCHAT_BENCH_HTML
  QXmlStreamReader xml(QByteArray::fromStdString(html));
  int elements = 0;
  while (!xml.atEnd()) {
    if (xml.readNext() == QXmlStreamReader::StartElement) ++elements;
  }
  INFO(xml.errorString().toStdString() << " at line " << xml.lineNumber());
  CHECK_FALSE(xml.hasError());
  CHECK(elements > 100);
#endif
}

// The stored aggregates equal those recomputed from the stored records (same bootstrap seed).
inline void check_recompute(const LoadedReport& lr, uint64_t seed) {
  const nlohmann::json again = aggregates_json(aggregate(lr.run, {1000, seed}));
  REQUIRE(again["groups"].size() == lr.aggregates["groups"].size());
  CHECK(again == lr.aggregates);
}

}  // namespace specchat::test
