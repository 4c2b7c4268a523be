#include "capi_internal.h"

extern "C" const char* di_version(void) { return DI_VERSION_STRING; }
