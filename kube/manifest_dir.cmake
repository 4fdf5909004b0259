# kube_manifest_dir: a directory of manifest files read by stat stamp (ManifestDir) and watched
# with libuv fs events, coalescing and a periodic relist (ManifestDirWatcher). Shared by the
# static-pod file source (podconfig/) and the standalone object store (cache/).
add_library(kube_manifest_dir
  ${CMAKE_CURRENT_LIST_DIR}/manifest_dir.cc
  ${CMAKE_CURRENT_LIST_DIR}/manifest_dir_watcher.cc)
target_link_libraries(kube_manifest_dir PUBLIC base PkgConfig::LIBUV PRIVATE base_sha256 spdlog::spdlog)

vm_add_test(kube_manifest_dir_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/manifest_dir_test.cc
          ${CMAKE_CURRENT_LIST_DIR}/manifest_dir_watcher_test.cc
  LIBS kube_manifest_dir)
