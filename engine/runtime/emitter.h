// Emitter: releases a sequence's accepted tokens in order and applies the stop rules.
#pragma once

#include <string>
#include <vector>

#include "engine/generator.h"
#include "engine/utf8.h"
#include "engine/vocab.h"

namespace specchat {

// Emits tokens in order and applies the stop rules (FAULT-KINDS B07, B09, B10, B17): the first
// of EOS/EOT, a stop string, or N reached ends generation; nothing after it is kept. Text is
// released only when it is complete UTF-8 and cannot be the start of a stop string.
class Emitter {
 public:
  Emitter(const Vocab& vocab, const GenerateRequest& req, const TokenCallback& cb, GenerationResult& res)
      : vocab_(vocab), req_(req), cb_(cb), res_(res) {}

  // Returns false when generation must end (res_.finish set).
  bool push(int32_t id, bool drafted, int step) {
    if (static_cast<int>(res_.tokens.size()) >= req_.max_tokens) {
      res_.finish = FinishReason::length;
      return false;
    }
    if (vocab_.is_eog(id)) {
      res_.finish = FinishReason::eos;
      return false;
    }
    const size_t start = text_.size();
    text_ += vocab_.token_bytes(id);
    // A stop string ends generation: tokens that reach into it are dropped.
    for (const std::string& s : req_.stop_strings) {
      if (s.empty()) continue;
      const size_t from = start >= s.size() ? start - s.size() + 1 : 0;
      const size_t at = text_.find(s, from);
      if (at != std::string::npos) {
        text_.resize(start);
        // Drop earlier kept tokens whose bytes reach into the stop string.
        while (!ends_.empty() && ends_.back() > at) {
          ends_.pop_back();
          res_.tokens.pop_back();
          if (res_.drafted.back() != 0) --res_.stats.n_accepted;
          res_.drafted.pop_back();
          steps_.pop_back();
        }
        res_.stats.n_generated = static_cast<int>(res_.tokens.size());
        text_.resize(ends_.empty() ? 0 : ends_.back());
        res_.finish = FinishReason::stop;
        return false;
      }
    }
    res_.tokens.push_back(id);
    res_.drafted.push_back(drafted ? 1 : 0);
    res_.stats.n_generated = static_cast<int>(res_.tokens.size());
    if (drafted) ++res_.stats.n_accepted;
    steps_.push_back(step);
    ends_.push_back(text_.size());
    release(false);
    if (static_cast<int>(res_.tokens.size()) >= req_.max_tokens) {
      res_.finish = FinishReason::length;
      return false;
    }
    return true;
  }

  // Flushes held-back events; the final text sanitises an incomplete UTF-8 tail.
  void finish() {
    release(true);
    res_.text = utf8_sanitize(text_);
  }

 private:
  void release(bool all) {
    size_t safe = text_.size();
    if (!all) {
      safe = utf8_complete_prefix(text_);
      for (const std::string& s : req_.stop_strings) {  // hold back a possible stop prefix
        for (size_t l = std::min(s.size() - (s.empty() ? 0 : 1), text_.size()); l > 0; --l) {
          if (text_.compare(text_.size() - l, l, s, 0, l) == 0) {
            safe = std::min(safe, text_.size() - l);
            break;
          }
        }
      }
    }
    while (next_event_ < res_.tokens.size() && (all || ends_[next_event_] <= safe)) {
      const size_t end = ends_[next_event_];
      TokenEvent ev;
      ev.id = res_.tokens[next_event_];
      ev.drafted = res_.drafted[next_event_] != 0;
      ev.step = steps_[next_event_];
      ev.stats = &res_.stats;
      // A token that ends inside a character (byte fallback, byte-level BPE) releases the
      // complete characters before it; its partial bytes go out with the token that completes
      // them. The last token of a finished run takes whatever is left (sanitised).
      const bool last = all && next_event_ + 1 == res_.tokens.size();
      const std::string_view pending = std::string_view(text_).substr(released_, end - released_);
      const size_t cut = last ? pending.size() : utf8_complete_prefix(pending);
      ev.text = utf8_sanitize(pending.substr(0, cut));
      released_ += cut;
      ++next_event_;
      if (cb_) cb_(ev);
    }
  }

  const Vocab& vocab_;
  const GenerateRequest& req_;
  const TokenCallback& cb_;
  GenerationResult& res_;
  std::string text_;
  std::vector<size_t> ends_;  // byte end of each kept token in text_
  std::vector<int> steps_;
  size_t next_event_ = 0, released_ = 0;
};


}  // namespace specchat
