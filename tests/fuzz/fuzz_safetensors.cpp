// The safetensors header parser (the input is a whole file) and the shard index parser (the same
// input read as model.safetensors.index.json).
#include "model/safetensors.h"

#include <cstdlib>

using namespace deepinfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (auto tensors = parse_safetensors(data, size, "fuzz.safetensors")) {
    for (const StoredTensor& t : tensors.value()) {
      // Every tensor lies inside the input and holds exactly its elements.
      if (t.data < data || t.data + t.nbytes > data + size) std::abort();
      if (static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype) != t.nbytes) std::abort();
      volatile uint8_t sink = 0;
      for (size_t i = 0; i < t.nbytes; ++i) sink = sink + t.data[i];  // reads must stay in bounds
    }
  }
  (void)parse_safetensors_index(std::string_view(reinterpret_cast<const char*>(data), size), "index.json");
  return 0;
}
