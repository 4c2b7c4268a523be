/* Links against an installed libdeepinfer and checks that the header and library agree. */
#include <deepinfer.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  char expected[32];
  snprintf(expected, sizeof expected, "%d.%d.%d", DI_VERSION_MAJOR, DI_VERSION_MINOR, DI_VERSION_PATCH);
  if (strcmp(di_version(), expected) != 0 || di_abi_version() != DI_ABI_VERSION) {
    fprintf(stderr, "header %s / library %s\n", expected, di_version());
    return 1;
  }
  di_error *err = di_engine_create(NULL, NULL);
  int ok = di_error_code(err) == DI_ERR_INVALID_ARGUMENT || di_error_code(err) == DI_ERR_INVALID_HANDLE;
  di_error_free(err);
  printf("deepinfer %s\n", di_version());
  return ok ? 0 : 1;
}
