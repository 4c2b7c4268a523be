#include "util/file_reading.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace deepinfer {
namespace {

// Closes the descriptor on every path out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string size_text(uint64_t bytes) {
  if (bytes >= (1ull << 20)) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} bytes", bytes);
}

}  // namespace

Result<std::string> read_whole_file(const std::filesystem::path& path, const FileLimits& limits) {
  const std::string name = path.string();
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
  Fd f{::open(name.c_str(), O_RDONLY | O_CLOEXEC | (limits.allow_pipes ? 0 : O_NONBLOCK))};
  if (f.fd < 0) {
    const int err = errno;
    // ENOTDIR: a component of the path is a file, so this one does not exist either.
    const bool missing = err == ENOENT || err == ENOTDIR;
    return make_error(missing ? Code::kNotFound : Code::kIo, "cannot open {}: {}", name, std::strerror(err));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) return make_error(Code::kIo, "cannot stat {}: {}", name, std::strerror(errno));
  const bool pipe = S_ISFIFO(st.st_mode) && limits.allow_pipes;
  if (!S_ISREG(st.st_mode) && !pipe) {
    return make_error(Code::kIo, "{} is {}, not a regular file", name, kind_of(st.st_mode));
  }
  auto too_large = [&](uint64_t bytes) {
    return make_error(limits.too_large, "{} is {}{}, more than the {} it may hold", name, pipe ? "over " : "",
                      size_text(bytes), size_text(limits.max_bytes));
  };
  if (!pipe && static_cast<uint64_t>(st.st_size) > limits.max_bytes) return too_large(static_cast<uint64_t>(st.st_size));
  std::string out;
  if (!pipe) out.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(Code::kIo, "cannot read {}: {}", name, std::strerror(errno));
    if (n == 0) break;
    // The file may grow while it is read (or be a pipe): the limit holds whatever stat said.
    if (out.size() + static_cast<std::size_t>(n) > limits.max_bytes) return too_large(out.size() + static_cast<std::size_t>(n));
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

bool entry_exists(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::symlink_status(path, ec));
}

}  // namespace deepinfer
