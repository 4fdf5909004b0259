# kube_objects: the API object model (Pod, ConfigMap, Secret and their lists), quantities, the
# JSON mapping, YAML-to-JSON conversion, and the manifest decoder (defaulting + validation).
add_library(kube_objects
  ${CMAKE_CURRENT_LIST_DIR}/base64.cc
  ${CMAKE_CURRENT_LIST_DIR}/defaults.cc
  ${CMAKE_CURRENT_LIST_DIR}/manifest_decoder.cc
  ${CMAKE_CURRENT_LIST_DIR}/object_decoder.cc
  ${CMAKE_CURRENT_LIST_DIR}/quantity.cc
  ${CMAKE_CURRENT_LIST_DIR}/validation.cc
  ${CMAKE_CURRENT_LIST_DIR}/yaml_to_json.cc)
target_link_libraries(kube_objects PUBLIC base nlohmann_json::nlohmann_json
                      PRIVATE yaml-cpp::yaml-cpp)

vm_add_test(kube_objects_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/base64_test.cc
          ${CMAKE_CURRENT_LIST_DIR}/manifest_decoder_test.cc
          ${CMAKE_CURRENT_LIST_DIR}/object_decoder_test.cc
          ${CMAKE_CURRENT_LIST_DIR}/quantity_test.cc
          ${CMAKE_CURRENT_LIST_DIR}/validation_test.cc
          ${CMAKE_CURRENT_LIST_DIR}/yaml_to_json_test.cc
  LIBS kube_objects)

# The libFuzzer target for the manifest decoder: only in the clang fuzz build (make fuzz), which
# compiles everything with -fsanitize=fuzzer-no-link so the decoder's code is instrumented.
option(VM_FUZZ "Build the libFuzzer targets (clang only)" OFF)
if(VM_FUZZ)
  add_executable(manifest_decoder_fuzzer ${CMAKE_CURRENT_LIST_DIR}/manifest_decoder_fuzzer.cc)
  target_compile_options(manifest_decoder_fuzzer PRIVATE -fsanitize=fuzzer)
  target_link_options(manifest_decoder_fuzzer PRIVATE -fsanitize=fuzzer)
  target_link_libraries(manifest_decoder_fuzzer PRIVATE kube_objects)
endif()
