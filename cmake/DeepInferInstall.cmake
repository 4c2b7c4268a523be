# Install rules: header, library, pkg-config file and the CMake package DeepInfer::deepinfer.
include(CMakePackageConfigHelpers)
install(TARGETS deepinfer EXPORT DeepInferTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT DeepInferTargets NAMESPACE DeepInfer:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/DeepInfer)
configure_package_config_file(cmake/DeepInferConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/DeepInferConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/DeepInfer)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/DeepInferConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/DeepInferConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/DeepInferConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/DeepInfer)
# The prefix relative to the .pc file, so the installed tree can move (cmake --install --prefix, packages).
file(RELATIVE_PATH DEEPINFER_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" DEEPINFER_PC_TO_PREFIX "${DEEPINFER_PC_TO_PREFIX}")
configure_file(cmake/deepinfer.pc.in ${CMAKE_CURRENT_BINARY_DIR}/deepinfer.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/deepinfer.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(TARGET deepinfer_cuda)  # a run-time loaded module: no link-time name
  install(TARGETS deepinfer_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_SKIP)
endif()
if(DEEPINFER_BUILD_CLI)
  install(TARGETS deepinfer_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
