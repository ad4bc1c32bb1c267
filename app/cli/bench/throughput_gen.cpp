#include "app/cli/bench/throughput_gen.h"

#include <algorithm>
#include <cstdlib>
#include <random>
#include <sstream>
#include <stdexcept>

namespace specchat::bench {

std::vector<int> default_buckets(int n_ctx) {
  if (n_ctx <= 4096) return {n_ctx / 8, n_ctx / 4, n_ctx / 2, 3 * n_ctx / 4};
  std::vector<int> b;
  for (int x = 1024; x <= 3 * (n_ctx / 4); x *= 2) b.push_back(x);
  return b;
}

namespace {

// Words of the body of prompt i of a tier; long enough for any bucket (grown on demand).
std::vector<std::string> body_words(const std::string& tier, int i, size_t want, std::mt19937_64& rng) {
  std::vector<std::string> w;
  auto add_text = [&](const std::string& t) {
    std::istringstream in(t);
    std::string x;
    while (in >> x) w.push_back(x);
  };
  if (tier == "low") {
    if (i % 2 == 0) {  // sorted numbers with a fixed step: each next number is predictable
      const int step = 3 + i, start = 10 + 7 * i;
      for (int k = 0; w.size() < want; ++k) w.push_back(std::to_string(start + step * k) + ",");
    } else {  // repetitive code: the same small function over and over with a counter
      for (int k = 0; w.size() < want; ++k) {
        add_text("def get_item_" + std::to_string(k) + "(items): return items[" + std::to_string(k) + "]");
      }
    }
  } else if (tier == "mixed") {
    static const char* facts[] = {
        "The library opens at nine in the morning.", "The river runs past the old mill.",
        "Most of the houses on the hill are painted white.", "The baker sells fresh bread every day.",
        "A small bridge crosses the stream near the school.", "The market is busiest on Saturday.",
        "Children play football in the park after class.", "The bus to the city leaves every hour.",
        "Apples grow in the orchard behind the farm.", "The museum has a room full of old clocks."};
    static const char* exams[] = {
        "Question: Which of these is a mammal? A) shark B) whale C) trout D) squid.",
        "Question: What is 7 times 8? A) 54 B) 56 C) 58 D) 64.",
        "Question: Which gas do plants take in? A) oxygen B) nitrogen C) carbon dioxide D) helium.",
        "Question: How many sides has a hexagon? A) five B) six C) seven D) eight.",
        "Question: Which planet is known as the red planet? A) Venus B) Mars C) Jupiter D) Saturn.",
        "Question: What is the boiling point of water at sea level? A) 90 C B) 100 C C) 110 C D) 120 C."};
    std::vector<int> order(10);
    for (int k = 0; k < 10; ++k) order[static_cast<size_t>(k)] = k;
    const std::string needle = "The secret number is " + std::to_string(1000 + 37 * i) + ".";
    bool placed = false;
    while (w.size() < want) {
      std::shuffle(order.begin(), order.end(), rng);
      for (int k : order) {
        if (i % 2 == 0) add_text(facts[k]);
        else add_text(exams[static_cast<size_t>(k) % 6]);
        if (!placed && w.size() > want / 3) {
          add_text(needle);
          placed = true;
        }
      }
    }
  } else {
    static const char* lines[] = {
        "The lantern swung in the wind and threw gold shapes across the wet stones.",
        "\"Where did you find it?\" asked Mira, turning the silver key in her fingers.",
        "\"Under the willow,\" said Tomas, \"where the owls argue every night.\"",
        "A violet storm folded itself over the harbour like a sleeping animal.",
        "Somewhere a violin practised the same sad question again and again.",
        "\"You promised me the moon,\" laughed the baker, \"and brought me a biscuit.\"",
        "The clockmaker's cat dreamed in gears, purring at every quarter hour.",
        "Seven paper boats sailed down the gutter toward an unknown sea.",
        "\"Do maps ever lie?\" the girl wondered. \"Only the honest ones,\" said her aunt.",
        "Frost wrote long letters on the window that nobody could read by noon.",
        "The giant apologised to the village for sneezing the roof off the chapel.",
        "\"Hush,\" whispered the fox, \"the snow is listening.\""};
    std::vector<int> order(12);
    for (int k = 0; k < 12; ++k) order[static_cast<size_t>(k)] = k;
    while (w.size() < want) {
      std::shuffle(order.begin(), order.end(), rng);
      for (int k : order) add_text(lines[k]);
    }
  }
  return w;
}

std::string instruction(const std::string& tier, int i) {
  if (tier == "low") return i % 2 == 0 ? "Continue the list of numbers:" : "Continue the Python code:";
  if (tier == "mixed") return i % 2 == 0 ? "Read the notes, then say what the secret number is." : "Answer the exam questions.";
  return i % 2 == 0 ? "Continue the story:" : "Continue the dialogue:";
}

std::string join(const std::string& head, const std::vector<std::string>& words, size_t n) {
  std::string s = head;
  for (size_t k = 0; k < n; ++k) s += (k == 0 ? "\n" : " ") + words[k];
  return s;
}

}  // namespace

BenchSuite make_throughput_suite(const Encoder& encode, const ThroughputOptions& opt) {
  if (opt.buckets.empty()) throw std::invalid_argument("bench-suite: no buckets");
  if (opt.per_cell < 1) throw std::invalid_argument("bench-suite: --per-cell must be at least 1");
  for (int b : opt.buckets) {
    if (b < 8) throw std::invalid_argument("bench-suite: bucket " + std::to_string(b) + " is below 8 tokens");
  }
  BenchSuite s;
  s.name = "throughput";
  s.description = "SpecChat's throughput split in the shape of SPEED-Bench: input-length buckets x entropy tiers "
                  "(low: code, sorted lists; mixed: needle in a haystack, exam questions; high: creative writing, "
                  "dialogue), generated by scripts/make-throughput-suite.";
  s.prompt_format = "raw";
  s.tokenizer = opt.tokenizer;
  std::mt19937_64 rng(opt.seed);
  for (const std::string& tier : entropy_tiers()) {
    for (int bucket : opt.buckets) {
      for (int i = 0; i < opt.per_cell; ++i) {
        const std::string head = instruction(tier, i);
        const std::vector<std::string> words = body_words(tier, i, static_cast<size_t>(bucket) + 8, rng);
        auto count = [&](size_t n) { return static_cast<int>(encode(join(head, words, n)).size()); };
        // Smallest word count reaching the bucket (token count grows with words), then the
        // closer of it and one word fewer.
        size_t lo = 0, hi = words.size();
        while (lo < hi) {
          const size_t mid = (lo + hi) / 2;
          if (count(mid) >= bucket) hi = mid;
          else lo = mid + 1;
        }
        size_t n = lo;
        if (n > 0 && std::abs(count(n - 1) - bucket) <= std::abs(count(n) - bucket)) --n;
        BenchPrompt p;
        p.id = tier + "-" + std::to_string(bucket) + "-" + std::to_string(i);
        p.category = "throughput";
        p.tier = tier;
        p.bucket = bucket;
        p.turns = {join(head, words, n)};
        p.source = "generated by scripts/make-throughput-suite from word pools written for SpecChat";
        p.input_ids = encode(p.turns.front());
        s.prompts.push_back(std::move(p));
      }
    }
  }
  return s;
}

}  // namespace specchat::bench
