// Helpers for the storage tests: a temporary directory, raw sqlite access that bypasses
// ConversationStore (to check what is really on disk), and catching a StorageError's kind.
#pragma once

#include <sqlite3.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "storage/conversation_store.h"

namespace specchat::test {

// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "specchat-storage-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A plain sqlite3 connection for setting up and inspecting files by hand.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) {
      std::string msg = sqlite3_errmsg(db_);
      sqlite3_close(db_);
      throw std::runtime_error("raw open: " + msg);
    }
    sqlite3_busy_timeout(db_, 5000);
  }
  ~RawDb() { sqlite3_close(db_); }
  RawDb(const RawDb&) = delete;
  RawDb& operator=(const RawDb&) = delete;

  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "?";
      sqlite3_free(err);
      throw std::runtime_error("raw exec '" + sql + "': " + msg);
    }
  }
  // First column of every row, as text ("" for NULL).
  std::vector<std::string> column(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
      throw std::runtime_error("raw prepare '" + sql + "': " + sqlite3_errmsg(db_));
    std::vector<std::string> out;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
      out.push_back(t ? t : "");
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) throw std::runtime_error("raw step '" + sql + "': " + sqlite3_errstr(rc));
    return out;
  }
  std::string scalar(const std::string& sql) {
    auto rows = column(sql);
    return rows.empty() ? std::string() : rows.front();
  }
  int64_t integer(const std::string& sql) { return std::stoll(scalar(sql)); }
  sqlite3* handle() const { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

// Runs f; returns the kind of the StorageError it throws, "" when it throws nothing, or
// "other: <what>" for any other exception.
inline std::string storage_error_kind(const std::function<void()>& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const StorageError& e) {
    if (message) *message = e.what();
    return e.kind();
  } catch (const std::exception& e) {
    return std::string("other: ") + e.what();
  }
  return "";
}

inline std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// prefix followed by the decimal i. (Not `"m" + std::to_string(i)`: g++ 12 at -O2/-O3 raises a
// false -Wrestrict on operator+(const char*, std::string&&), GCC bug 105329, fatal with -Werror.)
inline std::string numbered(const char* prefix, int64_t i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

inline Message make_message(int64_t conversation_id, const std::string& role, const std::string& text,
                            std::vector<int32_t> ids = {}) {
  Message m;
  m.conversation_id = conversation_id;
  m.role = role;
  m.text = text;
  m.token_ids = std::move(ids);
  return m;
}

}  // namespace specchat::test
