#include "capi_internal.h"

extern "C" {

di_code di_error_code(const di_error* err) { return err ? err->code : 0; }
const char* di_error_message(const di_error* err) { return err ? err->message.c_str() : ""; }
void di_error_free(di_error* err) { delete err; }

}
