// Process-wide logging with a replaceable sink. Thread-safe: the sink is called under a mutex.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <string_view>

namespace deepinfer {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

using LogSink = std::function<void(LogLevel, std::string_view)>;

// Replaces the sink (nullptr restores the default: stderr). Messages below `min_level` are dropped.
void set_log_sink(LogSink sink);
void set_log_level(LogLevel min_level);
LogLevel log_level();
void log_message(LogLevel level, std::string_view message);

template <class... Args>
void log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (level < log_level()) return;
  log_message(level, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace deepinfer
