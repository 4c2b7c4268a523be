#include "engine/event_queue.h"

#include "util/process.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace deepinfer {

Result<std::shared_ptr<EventQueue>> EventQueue::create() {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return make_error(Code::kIo, "cannot make the queue's eventfd: {}", std::strerror(errno));
  return std::shared_ptr<EventQueue>(new EventQueue(fd));
}

EventQueue::EventQueue(int fd) : fd_(fd), fork_generation_(fork_generation()) {}

EventQueue::~EventQueue() { ::close(fd_); }

void EventQueue::set_readable_locked(bool readable) {
  if (readable == readable_) return;
  if (readable) {
    const uint64_t one = 1;
    ssize_t n;
    do n = ::write(fd_, &one, sizeof one);
    while (n < 0 && errno == EINTR);
  } else {
    uint64_t count;
    ssize_t n;
    do n = ::read(fd_, &count, sizeof count);
    while (n < 0 && errno == EINTR);
  }
  readable_ = readable;
}

bool EventQueue::push(uint64_t tag, std::vector<Event>& events) {
  {
    std::lock_guard lock(mu_);
    if (closed_) return false;
    for (Event& e : events) events_.emplace_back(tag, std::move(e));
    if (!events_.empty()) set_readable_locked(true);
  }
  events.clear();
  cv_.notify_all();
  return true;
}

Result<std::optional<std::pair<uint64_t, Event>>> EventQueue::poll(int timeout_ms) {
  if (forked()) return make_error(Code::kClosed, "the queue belongs to the parent of this fork");
  std::unique_lock lock(mu_);
  auto ready = [&] { return closed_ || !events_.empty(); };
  if (timeout_ms < 0) {
    cv_.wait(lock, ready);
  } else if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready)) {
    return std::optional<std::pair<uint64_t, Event>>();
  }
  if (closed_) return make_error(Code::kClosed, "the queue was freed");
  auto item = std::move(events_.front());
  events_.pop_front();
  if (events_.empty()) set_readable_locked(false);
  return std::optional<std::pair<uint64_t, Event>>(std::move(item));
}

void EventQueue::close() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    events_.clear();
    set_readable_locked(false);
  }
  cv_.notify_all();
}

bool EventQueue::closed() const {
  std::lock_guard lock(mu_);
  return closed_;
}

}  // namespace deepinfer

namespace deepinfer {
bool EventQueue::forked() const { return fork_generation() != fork_generation_; }
}  // namespace deepinfer
