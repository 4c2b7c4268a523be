#include "backend/backend_options.h"

#include <charconv>
#include <limits>

namespace deepinfer {
namespace {

std::string quoted(std::string_view s) { return quote_option_text(s); }

Result<void> assign(bool& field, std::string_view key, std::string_view value) {
  DI_TRY(v, parse_bool_option(key, value));
  field = v;
  return ok();
}

Result<void> assign(int& field, std::string_view key, std::string_view value) {
  DI_TRY(v, parse_int_option(key, value, 0, std::numeric_limits<int>::max()));
  field = static_cast<int>(v);
  return ok();
}

std::string_view default_text(bool v) { return v ? "1" : "0"; }

}  // namespace

// Keys and values come from callers of the ABI: quote them short.
std::string quote_option_text(std::string_view s) {
  constexpr size_t kMax = 64;
  std::string q = "\"";
  q.append(s.substr(0, kMax));
  if (s.size() > kMax) q += "...";
  return q + "\"";
}

Result<bool> parse_bool_option(std::string_view key, std::string_view value) {
  for (std::string_view t : {"1", "true", "on", "yes"})
    if (value == t) return true;
  for (std::string_view f : {"0", "false", "off", "no"})
    if (value == f) return false;
  return make_error(Code::kInvalidArgument, "option {}: {} is not a boolean (1/0, true/false, on/off, yes/no)", quoted(key),
                    quoted(value));
}

Result<int64_t> parse_int_option(std::string_view key, std::string_view value, int64_t lo, int64_t hi) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size() || value.empty())
    return make_error(Code::kInvalidArgument, "option {}: {} is not an integer", quoted(key), quoted(value));
  if (v < lo || v > hi) return make_error(Code::kInvalidArgument, "option {}: {} is outside [{}, {}]", quoted(key), v, lo, hi);
  return v;
}

std::vector<OptionInfo> backend_option_infos() {
  std::vector<OptionInfo> rows;
#define DI_BACKEND_OPTION_ROW(name, type, def, help) rows.push_back({#name, #type, #def, help});
  DI_BACKEND_OPTIONS(DI_BACKEND_OPTION_ROW)
#undef DI_BACKEND_OPTION_ROW
  for (OptionInfo& r : rows) {  // booleans as the parser writes them
    if (r.default_value == "true") r.default_value = default_text(true);
    if (r.default_value == "false") r.default_value = default_text(false);
  }
  return rows;
}

Result<void> set_backend_option(BackendOptions& options, std::string_view key, std::string_view value) {
#define DI_BACKEND_OPTION_SET(name, type, def, help) \
  if (key == #name) return assign(options.name, key, value);
  DI_BACKEND_OPTIONS(DI_BACKEND_OPTION_SET)
#undef DI_BACKEND_OPTION_SET
  return make_error(Code::kNotFound, "{} is not a backend option", quoted(key));
}

}  // namespace deepinfer
