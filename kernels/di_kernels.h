// The launch functions of the CUDA kernels, one header per concept beside its .cu file(s); launch.h
// says what they share.
#pragma once

#include "attention.h"
#include "compressor.h"
#include "dequantize.h"
#include "elementwise.h"
#include "fp8_operands.h"
#include "gemv.h"
#include "hyper_connection.h"
#include "indexer.h"
#include "key_table.h"
#include "launch.h"
#include "moe.h"
#include "native_gemv.h"
#include "norm_rope.h"
#include "sampling.h"
#include "tile_linear.h"
