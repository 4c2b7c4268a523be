#pragma once

#include <cstdint>

namespace deepinfer::text {

// A vocabulary index, as the model's embedding and logits use it.
using TokenId = std::int32_t;

}  // namespace deepinfer::text
