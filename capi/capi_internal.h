// Shared by the ABI implementation: di_error, the handle tables, and the guard that turns Results
// and C++ exceptions into di_error*. No engine logic lives in capi/.
#pragma once

#include "deepinfer.h"
#include "util/result.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

struct di_error {
  di_code code;
  std::string message;
};

namespace deepinfer::capi {

// Returned when an error cannot be allocated: never NULL (which means success). di_error_free
// ignores it.
di_error* out_of_memory_error();

inline di_error* to_c(const Error& e) noexcept {
  try {
    return new di_error{static_cast<di_code>(e.code), e.message};
  } catch (...) {
    return out_of_memory_error();
  }
}
inline di_error* to_c(Code code, std::string message) noexcept { return to_c(Error{code, std::move(message)}); }

// Runs an ABI body; a failed Result or an escaping exception becomes a di_error*.
template <class F>
di_error* guard(F&& body) noexcept {
  try {
    Result<void> r = body();
    return r ? nullptr : to_c(r.error());
  } catch (const std::bad_alloc&) {
    return out_of_memory_error();
  } catch (const std::exception& e) {
    return to_c(Code::kInternal, std::string("unexpected exception: ") + e.what());
  } catch (...) {
    return to_c(Code::kInternal, "unexpected exception");
  }
}

// Live handles of one type. A handle is an id, never an address: ids are not reused, so a freed
// handle (or one of another type: the low bits carry the type) is recognised as invalid. Tables are
// never destroyed (see handles.cpp), and their locks are held across fork() (lock_for_fork).
template <class T, uint64_t Tag>
class HandleTable {
 public:
  static_assert(Tag < 16);
  static_assert(sizeof(void*) == 8, "handles are 64-bit ids");
  template <class H>
  H* add(std::shared_ptr<T> obj) {
    std::lock_guard lock(mu_);
    const uint64_t id = (next_++ << 4) | Tag;
    objects_.emplace(id, std::move(obj));
    return reinterpret_cast<H*>(static_cast<uintptr_t>(id));
  }
  template <class H>
  std::shared_ptr<T> get(const H* handle) const {
    std::lock_guard lock(mu_);
    auto it = objects_.find(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle)));
    return it == objects_.end() ? nullptr : it->second;
  }
  template <class H>
  std::shared_ptr<T> remove(const H* handle) {
    std::lock_guard lock(mu_);
    auto it = objects_.find(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle)));
    if (it == objects_.end()) return nullptr;
    auto obj = std::move(it->second);
    objects_.erase(it);
    return obj;
  }
  // Every live object (a copy of the list: fn runs without the table's lock).
  std::vector<std::shared_ptr<T>> all() const {
    std::lock_guard lock(mu_);
    std::vector<std::shared_ptr<T>> v;
    for (const auto& [id, obj] : objects_) v.push_back(obj);
    return v;
  }
  void lock_for_fork() { mu_.lock(); }
  void unlock_after_fork() { mu_.unlock(); }

 private:
  mutable std::mutex mu_;
  uint64_t next_ = 1;
  std::unordered_map<uint64_t, std::shared_ptr<T>> objects_;
};

inline Error invalid_handle(const char* what) {
  return Error{Code::kInvalidHandle, std::string(what) + " handle is NULL, freed, or of another type"};
}

inline Result<void> check_out(const void* out, const char* name) {
  if (!out) return make_error(Code::kInvalidArgument, "{} must not be NULL", name);
  return ok();
}

// (buf, cap, *out_len) output of n elements.
template <class T>
Result<void> copy_out(const T* data, size_t n, T* buf, size_t cap, size_t* out_len) {
  if (!out_len) return make_error(Code::kInvalidArgument, "out_len must not be NULL");
  if (n > cap) {
    *out_len = n;  // the size needed: the one out-parameter a failed call writes
    return make_error(Code::kBufferTooSmall, "{} elements need a buffer of {}, got {}", n, n, cap);
  }
  if (n && !buf) return make_error(Code::kInvalidArgument, "buf must not be NULL");
  if (n) std::memcpy(buf, data, n * sizeof(T));
  *out_len = n;
  return ok();
}

// Input (ptr, len): a NULL pointer is allowed only with len 0.
inline Result<void> check_in(const void* ptr, size_t len, const char* name) {
  if (!ptr && len) return make_error(Code::kInvalidArgument, "{} is NULL but its length is {}", name, len);
  return ok();
}

}  // namespace deepinfer::capi
