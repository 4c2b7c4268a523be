# capi/exported_symbols.txt is the one ABI manifest: "di_name NODE" per line, sorted by name, NODE the
# symbol version node (DEEPINFER_<major>.<minor>) of the release that added it. The linker's version
# script is made from it here; the ABI checks (tests/capi), the Debian symbols file and the SDKs'
# header checks read the same file.
set(DEEPINFER_ABI_MANIFEST ${PROJECT_SOURCE_DIR}/capi/exported_symbols.txt)
set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${DEEPINFER_ABI_MANIFEST})

# deepinfer_abi_nodes(<out-map-file>): writes the version script, one node per minor release, each
# inheriting the one before.
function(deepinfer_write_version_script out)
  file(STRINGS ${DEEPINFER_ABI_MANIFEST} lines)
  set(nodes "")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "^(di_[a-z0-9_]+) (DEEPINFER_[0-9]+\\.[0-9]+)$")
      message(FATAL_ERROR "${DEEPINFER_ABI_MANIFEST}: malformed line \"${line}\"")
    endif()
    list(APPEND nodes ${CMAKE_MATCH_2})
    list(APPEND "syms_${CMAKE_MATCH_2}" ${CMAKE_MATCH_1})
  endforeach()
  list(REMOVE_DUPLICATES nodes)
  list(SORT nodes COMPARE NATURAL)
  set(text "/* Generated from capi/exported_symbols.txt by cmake/DeepInferAbi.cmake: only di_* symbols are exported. */\n")
  set(previous "")
  foreach(node IN LISTS nodes)
    string(APPEND text "${node} {\n  global:\n")
    foreach(sym IN LISTS "syms_${node}")
      string(APPEND text "    ${sym};\n")
    endforeach()
    if(previous STREQUAL "")
      string(APPEND text "  local:\n    *;\n};\n")
    else()
      string(APPEND text "} ${previous};\n")
    endif()
    set(previous ${node})
  endforeach()
  file(WRITE ${out}.tmp "${text}")
  file(COPY_FILE ${out}.tmp ${out} ONLY_IF_DIFFERENT)
endfunction()
