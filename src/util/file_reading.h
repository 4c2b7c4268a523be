// Whole-file reads of the small files that untrusted paths name (config.json, tokenizer.json,
// generation_config.json, a prompt file). A model directory may hold a FIFO or a device under such a
// name: opening never blocks, only regular files are read (pipes where the caller allows them), and
// a file larger than the caller's limit is refused before it is read.
#pragma once

#include "util/result.h"

#include <cstdint>
#include <filesystem>
#include <string>

namespace deepinfer {

struct FileLimits {
  uint64_t max_bytes = 0;
  Code too_large = Code::kModelFormat;  // the code of the error for a larger file
  // Also read FIFOs (a shell's pipe or process substitution), blocking until the writer closes them,
  // still at most max_bytes. Model files never allow this.
  bool allow_pipes = false;
};

// The file's bytes. Missing file (or a path through a file): Code::kNotFound; a directory, device, socket (or FIFO unless
// allowed) or an error of the operating system (a symlink loop, no permission): Code::kIo naming
// the path and the reason.
Result<std::string> read_whole_file(const std::filesystem::path& path, const FileLimits& limits);

// Whether a directory entry exists under `path` at all, a dangling or looping symlink included:
// such an entry is meant to be read, and reading it reports what is wrong with it.
bool entry_exists(const std::filesystem::path& path);

}  // namespace deepinfer
