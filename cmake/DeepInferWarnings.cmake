# Warnings for the project's own C and C++ code (not for CUDA device code, which has its own flags).
add_compile_options(
  "$<$<COMPILE_LANGUAGE:C,CXX>:-Wall;-Wextra;-Wno-unused-parameter>"
  "$<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor>"
)
