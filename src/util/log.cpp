#include "util/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

namespace deepinfer {
namespace {

std::mutex g_mutex;                              // process-wide: the C ABI's logging is (di_set_log_callback)
LogSink g_sink;                                  // process-wide: the one sink, under g_mutex
std::atomic<LogLevel> g_level{LogLevel::kWarn};  // process-wide: di_set_log_level

const char* level_tag(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
    default: return "";
  }
}

}  // namespace

void set_log_sink(LogSink sink) {
  std::lock_guard lock(g_mutex);
  g_sink = std::move(sink);
}

void set_log_level(LogLevel min_level) { g_level.store(min_level); }
LogLevel log_level() { return g_level.load(); }

void log_message(LogLevel level, std::string_view message) {
  if (level < log_level()) return;
  std::lock_guard lock(g_mutex);
  if (g_sink) {
    g_sink(level, message);
  } else {
    std::fprintf(stderr, "deepinfer %s: %.*s\n", level_tag(level), static_cast<int>(message.size()),
                 message.data());
  }
}

}  // namespace deepinfer
