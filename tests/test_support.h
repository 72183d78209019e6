// Shared helpers for the QtTest suites: temporary directories and the team's shared/ data.
#pragma once

#include <QTemporaryDir>
#include <QtTest>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>

namespace zipmoe::testing {

#ifdef ZIPMOE_SOURCE_DIR
// The trained demo model the project ships (resources/demo-model, an HF directory).
inline std::filesystem::path demoModelDir() { return std::filesystem::path(ZIPMOE_SOURCE_DIR) / "resources/demo-model"; }
#endif

// A fresh directory under the system temp dir, removed at scope exit.
class TempDir {
 public:
  TempDir() : dir_(QDir::tempPath() + "/zipmoe-test-XXXXXX") { QVERIFY2(dir_.isValid(), "cannot create temp dir"); }
  std::filesystem::path path() const { return std::filesystem::path(dir_.path().toStdString()); }
  std::filesystem::path operator/(const std::string& name) const { return path() / name; }

 private:
  QTemporaryDir dir_;
};

// ../shared next to the checkout; empty when absent (tests then QSKIP).
inline std::filesystem::path sharedDir() {
  std::filesystem::path p(ZIPMOE_SHARED_DIR);
  return std::filesystem::exists(p / "data") ? p : std::filesystem::path();
}

// Where a test saves pictures and figures: $ZIPMOE_ARTIFACTS_DIR, else `fallback` (created).
inline QString artifactsDir(const QString& fallback) {
  const QString env = qEnvironmentVariable("ZIPMOE_ARTIFACTS_DIR");
  const QString dir = env.isEmpty() ? fallback : env;
  QDir().mkpath(dir);
  return dir;
}

inline std::string readText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace zipmoe::testing

// QVERIFY that `expr` throws zipmoe::Error whose message contains every listed fragment.
#define ZIPMOE_EXPECT_ERROR(expr, ...)                                                       \
  do {                                                                                       \
    bool thrown_ = false;                                                                    \
    try {                                                                                    \
      expr;                                                                                  \
    } catch (const zipmoe::Error& e_) {                                                      \
      thrown_ = true;                                                                        \
      const std::string msg_ = e_.what();                                                    \
      for (const std::string& frag_ : std::initializer_list<std::string>{__VA_ARGS__})       \
        QVERIFY2(msg_.find(frag_) != std::string::npos,                                      \
                 qPrintable(QString("message '%1' lacks '%2'").arg(msg_.c_str(), frag_.c_str()))); \
    }                                                                                        \
    QVERIFY2(thrown_, "expected zipmoe::Error from " #expr);                                 \
  } while (0)
