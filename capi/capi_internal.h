// Shared by the ABI implementation files: the di_error struct and the Error -> di_error translation.
#pragma once

#include "deepinfer.h"
#include "util/result.h"

#include <string>

struct di_error {
  di_code code;
  std::string message;
};
