// Result<T>: the return type of every fallible path inside the engine (Boost.Outcome).
// An Error carries a stable Code (mirrored 1:1 by di_code in the C ABI) and a message for humans.
#pragma once

#include <boost/outcome/result.hpp>
#include <boost/outcome/try.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <utility>

namespace deepinfer {

// Stable, append-only. capi/ static_asserts that these equal the DI_ERR_* values of deepinfer.h.
enum class Code : int32_t {
  kOk = 0,
  kInvalidArgument = 1,   // a parameter is out of range or malformed
  kNotFound = 2,          // a file, tensor or key that must exist does not
  kModelFormat = 3,       // a checkpoint, config or tokenizer file is malformed
  kUnsupported = 4,       // valid input that this build cannot handle (names what)
  kOutOfMemory = 5,
  kCapacity = 6,          // a request does not fit the engine's limits (context, pool)
  kBufferTooSmall = 7,    // out_len reports the size needed
  kCancelled = 8,
  kGrammar = 9,           // a grammar / schema / regex failed to compile
  kIo = 10,               // the operating system refused a read or write
  kBackend = 11,          // the device (CUDA) failed
  kState = 12,            // the call is not valid in the object's current state
  kTimeout = 13,          // a poll ended without an event
  kClosed = 14,           // the object was shut down
  kInvalidHandle = 15,    // a handle that is NULL, freed or of another type (C ABI)
  kInternal = 100,        // a bug: an invariant broke
};

const char* code_name(Code c);

struct Error {
  Code code = Code::kInternal;
  std::string message;
};

template <class T>
using Result = boost::outcome_v2::result<T, Error, boost::outcome_v2::policy::terminate>;

inline auto ok() { return boost::outcome_v2::success(); }

template <class... Args>
Error make_error(Code code, fmt::format_string<Args...> f, Args&&... args) {
  return Error{code, fmt::format(f, std::forward<Args>(args)...)};
}

}  // namespace deepinfer

// DI_TRY(x, expr): evaluate a Result; on error return it from the enclosing function, else bind
// `auto&& x` to the value (Boost 1.74 syntax: a plain name, no type).
// DI_TRYV(expr): the same for Result<void>.
#define DI_TRY(...) BOOST_OUTCOME_TRY(__VA_ARGS__)
#define DI_TRYV(...) BOOST_OUTCOME_TRYV(__VA_ARGS__)
