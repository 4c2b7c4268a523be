#include "cli/cli_util.h"

#include "util/file_reading.h"

#include <chrono>
#include <filesystem>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace deepinfer::cli {

int report(const Result<void>& r) {
  if (r) return 0;
  std::fprintf(stderr, "deepinfer: %s: %s\n", code_name(r.error().code), r.error().message.c_str());
  return 1;
}

Result<std::vector<int32_t>> parse_token_ids(const std::string& text, const std::string& source) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    char* end = nullptr;
    long long v = std::strtoll(word.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v > INT32_MAX)
      return make_error(Code::kInvalidArgument, "{}: \"{}\" is not a token id", source, word);
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

Result<std::string> read_input_file(const std::string& path) {
  return read_whole_file(path, FileLimits{256ull << 20, Code::kInvalidArgument, /*allow_pipes=*/true});
}

Result<std::vector<int32_t>> read_token_ids(const std::string& path) {
  DI_TRY(text, read_input_file(path));
  return parse_token_ids(text, path);
}

std::vector<std::pair<std::string, std::string>> options_from_env() {
  std::vector<std::pair<std::string, std::string>> out;
  const char* env = std::getenv("DEEPINFER_OPTIONS");
  if (!env) return out;
  std::string all(env);
  for (size_t at = 0; at < all.size();) {
    const size_t end = std::min(all.find(',', at), all.size());
    const std::string item = all.substr(at, end - at);
    const size_t eq = item.find('=');
    if (!item.empty()) out.emplace_back(item.substr(0, eq), eq == std::string::npos ? "" : item.substr(eq + 1));
    at = end + 1;
  }
  return out;
}

Result<BackendOptions> backend_options_from_env() {
  BackendOptions o;
  for (const auto& [key, value] : options_from_env()) {
    auto set = set_backend_option(o, key, value);
    if (!set && set.error().code != Code::kNotFound) return set.error();
  }
  return o;
}

Result<std::unique_ptr<Backend>> make_backend(const std::string& device) {
  DI_TRY(options, backend_options_from_env());
  if (device == "cpu") return make_cpu_backend();
  if (device == "cuda") return make_cuda_backend(options);
  if (device.rfind("cuda:", 0) == 0) {
    char* end = nullptr;
    const long n = std::strtol(device.c_str() + 5, &end, 10);
    if (end == device.c_str() + 5 || *end != '\0' || n < 0 || n > 1024)
      return make_error(Code::kInvalidArgument, "device \"{}\": expected cuda or cuda:N", device);
    options.cuda_device = static_cast<int>(n);
    return make_cuda_backend(options);
  }
  return make_error(Code::kUnsupported, "device \"{}\" is not available in this build", device);
}

Result<std::unique_ptr<DeepseekV4>> load_model_with_progress(const std::string& dir, Backend& backend) {
  std::fprintf(stderr, "loading %s on %s ...", dir.c_str(), backend.name().c_str());
  std::fflush(stderr);
  auto t0 = std::chrono::steady_clock::now();
  auto model = DeepseekV4::load(dir, backend);
  if (!model) {
    std::fprintf(stderr, " failed\n");
    return model;
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto& c = model.value()->config();
  std::fprintf(stderr, " %d layers, hidden %d, vocab %d, %.2f s\n", c.num_layers, c.hidden_size, c.vocab_size, s);
  return model;
}

namespace {
std::string g_command_line;
}

void set_command_line(int argc, char** argv) {
  g_command_line.clear();
  for (int i = 0; i < argc; ++i) {
    if (i) g_command_line += ' ';
    std::string a = argv[i];
    if (i == 0) {
      const size_t slash = a.rfind('/');
      if (slash != std::string::npos) a = a.substr(slash + 1);
    }
    g_command_line += a;
  }
}

const std::string& command_line() { return g_command_line; }

}  // namespace deepinfer::cli
