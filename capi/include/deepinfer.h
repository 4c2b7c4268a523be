/* deepinfer.h: the C ABI of DeepInfer (the only public header). Placeholder until the ABI v1 lands. */
#ifndef DEEPINFER_H
#define DEEPINFER_H

#include <stddef.h>
#include <stdint.h>

#if defined(DI_BUILDING_LIBRARY)
#define DI_API __attribute__((visibility("default")))
#else
#define DI_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define DI_VERSION_MAJOR 0
#define DI_VERSION_MINOR 1
#define DI_VERSION_PATCH 0
#define DI_ABI_VERSION 0

typedef int32_t di_code;
typedef struct di_error di_error;

/* "MAJOR.MINOR.PATCH" of the loaded library; static storage. */
DI_API const char *di_version(void);
DI_API di_code di_error_code(const di_error *err);
DI_API const char *di_error_message(const di_error *err);
DI_API void di_error_free(di_error *err);

#ifdef __cplusplus
}
#endif

#endif /* DEEPINFER_H */
