#include "util/result.h"

namespace deepinfer {

const char* code_name(Code c) {
  switch (c) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid argument";
    case Code::kNotFound: return "not found";
    case Code::kModelFormat: return "model format";
    case Code::kUnsupported: return "unsupported";
    case Code::kOutOfMemory: return "out of memory";
    case Code::kCapacity: return "capacity";
    case Code::kBufferTooSmall: return "buffer too small";
    case Code::kCancelled: return "cancelled";
    case Code::kGrammar: return "grammar";
    case Code::kIo: return "i/o";
    case Code::kBackend: return "backend";
    case Code::kState: return "state";
    case Code::kTimeout: return "timeout";
    case Code::kClosed: return "closed";
    case Code::kInvalidHandle: return "invalid handle";
    case Code::kInternal: return "internal";
  }
  return "unknown";
}

}  // namespace deepinfer
