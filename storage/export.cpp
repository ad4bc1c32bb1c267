// Markdown and HTML export (see export.h). JSON export and import are in export_json.cpp.
#include "storage/export.h"

#include <charconv>
#include <cmath>
#include <ctime>
#include <string>
#include <vector>

#include "storage/branches.h"

namespace specchat {
namespace {

// Fixed-point with `decimals` digits. std::to_chars, not printf: the GUI process runs under the
// user's locale (Qt calls setlocale), where printf could write "123,4".
std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) v = 0;
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals);
  return std::string(buf, r.ptr);
}

// "2024-05-01 12:34 UTC" for a Unix epoch ms time; "" for 0.
std::string utc_time(int64_t ms) {
  if (ms <= 0) return "";
  const std::time_t t = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  if (!gmtime_r(&t, &tm)) return "";
  char buf[32];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return std::string(buf, n);
}

std::string display_title(const Conversation& c) {
  std::string t = c.title.empty() ? "Untitled conversation" : c.title;
  for (char& ch : t)
    if (ch == '\n' || ch == '\r') ch = ' ';  // a heading is one line
  return t;
}

const char* role_label(const std::string& role) {
  if (role == "user") return "You";
  if (role == "assistant") return "Assistant";
  return "System";
}

bool has_stats(const Message& m) {
  return m.role == "assistant" && (m.stats.n_tokens > 0 || !m.stats.mode.empty());
}

// "speculative · 42 tokens · 123.4 tokens/s · TTFT 41.3 ms · acceptance 82.0% · mean accepted
// length 3.10 · 30 of 42 tokens from accepted drafts". Speculation fields appear only for a
// generation that drafted. A PIPO reply: "pipo (approximate: not verified by the target) · 42
// tokens · … · token 2 kept 61.0% · 1.61 tokens/step".
std::string stats_line(const Message& m) {
  const MessageStats& s = m.stats;
  const char* sep = " \u00b7 ";
  if (s.mode == "pipo") {
    // A PIPO reply (docs/design/pipo.md) is approximate and says so wherever it is shown; its
    // acceptance is token 2's (kept by the confidence head, never verified by the target).
    return "pipo (approximate: not verified by the target)" + std::string(sep) + std::to_string(s.n_tokens) +
           " tokens" + sep + fixed(s.tokens_per_s, 1) + " tokens/s" + sep + "TTFT " + fixed(s.ttft_ms, 1) + " ms" +
           sep + "token 2 kept " + fixed(100 * s.acceptance_rate, 1) + "%" + sep + fixed(s.mean_accepted_length, 2) +
           " tokens/step";
  }
  std::string out = s.mode.empty() ? "" : s.mode + sep;
  out += std::to_string(s.n_tokens) + " tokens" + sep + fixed(s.tokens_per_s, 1) + " tokens/s" +
         sep + "TTFT " + fixed(s.ttft_ms, 1) + " ms";
  if (s.n_drafted > 0 || s.mode == "speculative") {
    out += sep + std::string("acceptance ") + fixed(100 * s.acceptance_rate, 1) + "%";
    out += sep + std::string("mean accepted length ") + fixed(s.mean_accepted_length, 2);
  }
  if (!m.drafted.empty()) {
    size_t n = 0;
    for (uint8_t d : m.drafted) n += d ? 1 : 0;
    out += sep + std::to_string(n) + " of " + std::to_string(m.drafted.size()) +
           " tokens from accepted drafts";
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

// Readable on light and dark viewers alike; text keeps its line breaks (pre-wrap) because chat
// replies are plain text with newlines, not HTML.
constexpr const char* kHtmlStyle = R"css(
:root { color-scheme: light dark; --fg: #1d1d1f; --bg: #ffffff; --muted: #6e6e73;
        --user: #eef3fb; --assistant: #f5f5f7; --system: #fff8e6; --border: #d2d2d7; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #f5f5f7; --bg: #1c1c1e; --muted: #a1a1a6; --user: #1f2a3a; --assistant: #2c2c2e;
          --system: #3a3320; --border: #3a3a3c; } }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
       background: var(--bg); max-width: 48rem; margin: 2rem auto; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
.meta { color: var(--muted); font-size: .85rem; margin: 0 0 1.5rem; }
.msg { border: 1px solid var(--border); border-radius: 10px; padding: .75rem 1rem; margin: 0 0 1rem; }
.user { background: var(--user); } .assistant { background: var(--assistant); }
.system { background: var(--system); }
.role { font-weight: 600; font-size: .85rem; margin-bottom: .25rem; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; }
.stats { color: var(--muted); font-size: .8rem; margin-top: .5rem; }
)css";

// Chat text keeps its line breaks in Markdown: a single newline between two non-empty lines
// becomes a hard line break (two trailing spaces, CommonMark §6.7), which Markdown would
// otherwise join into one paragraph. Lines inside ``` / ~~~ fences stay as they are.
std::string markdown_line_breaks(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\n') {
      lines.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  auto is_fence = [](const std::string& l) {
    const size_t p = l.find_first_not_of(' ');
    return p != std::string::npos && p < 4 && (l.compare(p, 3, "```") == 0 || l.compare(p, 3, "~~~") == 0);
  };
  auto blank = [](const std::string& l) { return l.find_first_not_of(" \t\r") == std::string::npos; };
  std::string out;
  bool in_fence = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    const bool fence = is_fence(l);
    out += l;
    if (i + 1 < lines.size()) {
      const bool next_fence = is_fence(lines[i + 1]);
      if (!in_fence && !fence && !next_fence && !blank(l) && !blank(lines[i + 1]) &&
          !(l.size() >= 2 && l.compare(l.size() - 2, 2, "  ") == 0))
        out += "  ";
      out += '\n';
    }
    if (fence) in_fence = !in_fence;
  }
  return out;
}

}  // namespace

std::string export_markdown(const Conversation& c, const std::vector<Message>& messages) {
  std::string out = "# " + display_title(c) + "\n\n";
  if (const std::string when = utc_time(c.created_ms); !when.empty())
    out += "*Exported from SpecChat \u00b7 created " + when + "*\n\n";
  if (!c.system_prompt.empty()) {
    out += "> **System prompt:**\n";
    std::string line;
    for (size_t i = 0; i <= c.system_prompt.size(); ++i) {  // quote every line
      if (i == c.system_prompt.size() || c.system_prompt[i] == '\n') {
        out += "> " + line + "\n";
        line.clear();
      } else {
        line += c.system_prompt[i];
      }
    }
    out += "\n";
  }
  for (const Message& m : branches::active_path(messages)) {
    out += std::string("**") + role_label(m.role) + "**\n\n" + markdown_line_breaks(m.text) + "\n\n";
    if (has_stats(m)) {  // appended piecewise: "*" + std::string trips GCC bug 105329 (-Wrestrict)
      out += '*';
      out += stats_line(m);
      out += "*\n\n";
    }
  }
  return out;
}

std::string export_html(const Conversation& c, const std::vector<Message>& messages) {
  const std::string title = html_escape(display_title(c));
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<meta name=\"generator\" content=\"SpecChat\">\n<title>" + title + "</title>\n<style>" +
      kHtmlStyle + "</style>\n</head>\n<body>\n<h1>" + title + "</h1>\n<p class=\"meta\">Exported from SpecChat";
  if (const std::string when = utc_time(c.created_ms); !when.empty())
    out += " \u00b7 created " + html_escape(when);
  out += "</p>\n";
  if (!c.system_prompt.empty())
    out += "<section class=\"msg system\"><div class=\"role\">System prompt</div>"
           "<div class=\"text\">" + html_escape(c.system_prompt) + "</div></section>\n";
  for (const Message& m : branches::active_path(messages)) {
    const std::string cls = m.role == "user" || m.role == "assistant" ? m.role : "system";
    out += "<article class=\"msg " + cls + "\"><div class=\"role\">" + role_label(m.role) +
           "</div><div class=\"text\">" + html_escape(m.text) + "</div>";
    if (has_stats(m)) out += "<div class=\"stats\">" + html_escape(stats_line(m)) + "</div>";
    out += "</article>\n";
  }
  out += "</body>\n</html>\n";
  return out;
}

}  // namespace specchat
