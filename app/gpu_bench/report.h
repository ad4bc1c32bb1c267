// Rows of the GPU check: printed as a table and written as JSON with the same fields.
// Plain C++ (no JSON library: the GPU machine has none of our Debian packages).
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace specchat::bench {

// One row: ordered (key, already-encoded JSON value) pairs.
class Row {
 public:
  Row& str(const std::string& k, const std::string& v) { return put(k, quote(v)); }
  Row& num(const std::string& k, double v) {
    if (!std::isfinite(v)) return put(k, "null");
    char b[64];
    std::snprintf(b, sizeof b, "%.6g", v);
    return put(k, b);
  }
  Row& boolean(const std::string& k, bool v) { return put(k, v ? "true" : "false"); }
  std::string json() const {
    std::string s = "{";
    for (size_t i = 0; i < kv_.size(); ++i) s += (i ? ", " : "") + quote(kv_[i].first) + ": " + kv_[i].second;
    return s + "}";
  }
  static std::string quote(const std::string& v) {
    std::string s = "\"";
    for (char c : v) {
      if (c == '"' || c == '\\') s += '\\';
      if (static_cast<unsigned char>(c) < 0x20) {
        char b[8];
        std::snprintf(b, sizeof b, "\\u%04x", c);
        s += b;
        continue;
      }
      s += c;
    }
    return s + "\"";
  }

 private:
  Row& put(const std::string& k, const std::string& v) {
    kv_.emplace_back(k, v);
    return *this;
  }
  std::vector<std::pair<std::string, std::string>> kv_;
};

// Named sections of rows, in order.
struct Report {
  std::vector<std::pair<std::string, std::vector<Row>>> sections;
  std::vector<Row>& section(const std::string& name) {
    for (auto& s : sections) {
      if (s.first == name) return s.second;
    }
    sections.emplace_back(name, std::vector<Row>{});
    return sections.back().second;
  }
  std::string json() const {
    std::string s = "{\n";
    for (size_t i = 0; i < sections.size(); ++i) {
      s += "  " + Row::quote(sections[i].first) + ": [\n";
      const auto& rows = sections[i].second;
      for (size_t j = 0; j < rows.size(); ++j) s += "    " + rows[j].json() + (j + 1 < rows.size() ? ",\n" : "\n");
      s += std::string("  ]") + (i + 1 < sections.size() ? ",\n" : "\n");
    }
    return s + "}\n";
  }
};

}  // namespace specchat::bench
