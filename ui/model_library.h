// The model library's data (issue 12, feature 3; the dialog is model_library_dialog.h): the GGUF
// files in chosen folders with what their headers say, and for a chosen target the drafts that
// can speculate for it: same vocabulary by the check the engine applies when it loads a pair
// (check_draft_vocab), and fewer parameters than the target. Qt value types, no widgets.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>

#include <cstdint>

namespace specchat::ui {

// One GGUF file. Read from its header and tensor table only (the mapping is not touched
// beyond them), so scanning a folder of multi-GB files is quick.
struct ModelEntry {
  QString path;               // absolute
  qint64 size_bytes = 0;
  QString name;               // general.name, else the file name
  QString architecture;       // general.architecture ("llama")
  qint64 n_params = 0;        // sum of the tensors' element counts
  QStringList weight_types;   // distinct tensor types, most common first ("f16", "q8_0")
  int n_ctx_train = 0;        // <arch>.context_length, 0 when absent
  int n_vocab = 0;            // tokenizer.ggml.tokens entries
  quint64 vocab_hash = 0;     // Vocab::hash(): equal hashes = the same tokenizer
  bool has_chat_template = false;  // tokenizer.chat_template present
  QString chat_template_name;      // chat_template_name_for(tokenizer.chat_template); "" = unknown
  QString error;              // why the file cannot be used (not GGUF, no vocabulary); others empty then
  bool ok() const { return error.isEmpty(); }
};

// Reads one file. Never throws: a bad file comes back with `error` set.
ModelEntry read_model_entry(const QString& path);

// Every *.gguf file in `folders` and their subfolders (two levels down), sorted by path,
// duplicates (the same absolute path) once.
QList<ModelEntry> scan_model_folders(const QStringList& folders);

// Whether `draft` can be the draft model of `target`: both readable, the engine's vocabulary
// check passes (check_draft_vocab on the two files' vocabularies), and the draft is smaller. When
// not, `why` says so in words.
bool is_compatible_draft(const ModelEntry& target, const ModelEntry& draft, QString* why = nullptr);

// The compatible drafts of `target` among `all`, smallest first (the fastest drafter first).
QList<ModelEntry> compatible_drafts(const ModelEntry& target, const QList<ModelEntry>& all);

// Physical memory of this machine in bytes (0 when unknown) and whether a model of
// `size_bytes` fits in it with room for its KV cache and the app (size × 1.2 < RAM).
qint64 physical_memory_bytes();
bool fits_in_memory(qint64 size_bytes, qint64 memory_bytes);

// "1.2 B", "35 M", "900 K" parameters.
QString format_params(qint64 n);

}  // namespace specchat::ui
