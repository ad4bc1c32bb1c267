// libFuzzer target for everything that reads a GGUF file a user hands us: the GGUF parser
// (metadata, tensor-info table, data ranges), the vocabulary (Vocab::from_gguf, the tokenizer
// built from it, encode/decode of a fixed text) and model construction (LlamaModel::load on the
// CPU backend, then one decode step).
//
// Contract checked: any input either loads or is refused with one of the engine's typed errors
// (GgufError, VocabError, ModelError). Anything else is a finding: a sanitizer report (ASan,
// UBSan), an escaping std::exception such as std::bad_alloc or std::length_error (a size taken
// from the file without a bound), a crash, a hang, or a malloc over libFuzzer's -malloc_limit_mb.
//
// Build and run: scripts/fuzz (clang-14 + libfuzzer-14-dev, ASan + UBSan).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/gguf.h"
#include "engine/model.h"
#include "engine/vocab.h"
#if SPECCHAT_FUZZ_TOKENIZER
#include "engine/tokenizer.h"
#endif

namespace {

using namespace specchat;

// The model loader takes a path: hand it the input through an anonymous memory file.
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) {
    fd_ = memfd_create("fuzz.gguf", 0);
    if (fd_ < 0) std::abort();
    size_t done = 0;
    while (done < size) {
      const ssize_t n = write(fd_, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
  }
  ~MemFile() { close(fd_); }
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_ = -1;
};

void exercise_vocab(const GgufFile& file) {
  Vocab vocab = Vocab::from_gguf(file);
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < vocab.size() && id < 64; ++id) ids.push_back(id);
  (void)vocab.decode(ids, true);
  (void)vocab.hash();
#if SPECCHAT_FUZZ_TOKENIZER
  Tokenizer tok(vocab);
  const std::vector<int32_t> enc = tok.encode("Once upon a time <s> 🙂 \xff\xfe x");
  (void)tok.decode(enc);
#endif
}

void exercise_model(const uint8_t* data, size_t size) {
  MemFile mem(data, size);
  LlamaModel::Options opt;
  opt.n_ctx = 0;  // the file's own context length: a hostile value must be refused, not allocated
  opt.n_threads = 1;
  opt.max_batch = 4;
  auto model = LlamaModel::load(mem.path(), opt);
  if (model->config().n_ctx_train > 0 && model->vocab().size() > 0) {
    const int32_t tok = model->vocab().bos_id >= 0 && model->vocab().bos_id < model->vocab().size()
                            ? model->vocab().bos_id : 0;
    const std::vector<int32_t> toks{tok};
    const Batch b = Batch::chain(toks, 0, false);
    (void)model->forward(b);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    GgufFile file = GgufFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz-input");
    try {
      exercise_vocab(file);
    } catch (const VocabError&) {
    } catch (const GgufError&) {
    }
    exercise_model(data, size);
  } catch (const GgufError&) {
  } catch (const VocabError&) {
  } catch (const ModelError&) {
  } catch (const std::exception& e) {
    // Any other exception means a check is missing: report it as a crash with its message.
    std::fprintf(stderr, "untyped exception escaped the loader: %s\n", e.what());
    std::abort();
  }
  return 0;
}
