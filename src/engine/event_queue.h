// A completion queue: the events of many sessions in one place, each with its session's tag, and an
// eventfd that is readable exactly while events are queued (for event loops: asyncio, tokio, Go).
// Thread-safe.
#pragma once

#include "engine/event.h"
#include "util/result.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace deepinfer {

class EventQueue {
 public:
  static Result<std::shared_ptr<EventQueue>> create();
  ~EventQueue();
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  // Appends events in order; false when the queue was closed (the caller keeps them).
  bool push(uint64_t tag, std::vector<Event>& events);
  // The next event and its tag; nullopt when timeout_ms passed first (-1: wait for ever). kClosed
  // after close() or in a fork's child.
  Result<std::optional<std::pair<uint64_t, Event>>> poll(int timeout_ms);
  int fd() const { return fd_; }
  // Drops the queued events; later pushes are refused.
  void close();
  bool closed() const;
  // In a fork's child (its waiters were the parent's threads).
  bool forked() const;

 private:
  explicit EventQueue(int fd);
  void set_readable_locked(bool readable);

  const int fd_;
  const uint64_t fork_generation_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<uint64_t, Event>> events_;
  bool readable_ = false;  // the eventfd's counter is nonzero
  bool closed_ = false;
};

}  // namespace deepinfer
