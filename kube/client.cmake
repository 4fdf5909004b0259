# kube_client: credentials, the HTTP client over libcurl + libuv, API Status errors, the reflector
# and preflight. Generic objects (nlohmann::json); the typed model lives in kube_objects.
add_library(kube_client
  ${CMAKE_CURRENT_LIST_DIR}/api_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/api_error.cc
  ${CMAKE_CURRENT_LIST_DIR}/backoff.cc
  ${CMAKE_CURRENT_LIST_DIR}/credentials.cc
  ${CMAKE_CURRENT_LIST_DIR}/http_client.cc
  ${CMAKE_CURRENT_LIST_DIR}/object_store.cc
  ${CMAKE_CURRENT_LIST_DIR}/preflight.cc
  ${CMAKE_CURRENT_LIST_DIR}/reflector.cc
  ${CMAKE_CURRENT_LIST_DIR}/watch_decoder.cc
  ${CMAKE_CURRENT_LIST_DIR}/token_source.cc
)
target_include_directories(kube_client PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(kube_client PUBLIC base nlohmann_json::nlohmann_json spdlog::spdlog
                      CURL::libcurl PkgConfig::LIBUV PRIVATE kube_objects yaml-cpp::yaml-cpp)

vm_add_test(kube_credentials_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/credentials_test.cc
            LIBS kube_client)
vm_add_test(kube_api_error_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/api_error_test.cc
            LIBS kube_client)
vm_add_test(kube_backoff_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/backoff_test.cc LIBS kube_client)
vm_add_test(kube_watch_decoder_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/watch_decoder_test.cc
            LIBS kube_client)
vm_add_test(kube_object_store_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/object_store_test.cc
            LIBS kube_client)
