#include "kubeclient/dl/nghttp2_library.h"

#include <string>

#include "kubeclient/dl/dl_library.h"

namespace kubeclient {
namespace {

// libnghttp2's soname. In its own section so that the image build can read it.
[[gnu::used, gnu::section(".vm_dlopen")]] constexpr char kLibnghttp2[] = "libnghttp2.so.14";

template <typename Fn>
bool FindNghttp2(void* handle, const char* name, Fn* fn, std::string* error) {
  return dl::Find(handle, kLibnghttp2, name, fn, error);
}

base::Result<const Nghttp2Library*> OpenNghttp2() {
  std::string error;
  void* handle = dl::Open(kLibnghttp2, &error);
  if (handle == nullptr) return base::Status::Error(error);
  static Nghttp2Library lib;
  const bool found =
      FindNghttp2(handle, "nghttp2_session_callbacks_new", &lib.callbacks_new, &error) &&
      FindNghttp2(handle, "nghttp2_session_callbacks_del", &lib.callbacks_del, &error) &&
      FindNghttp2(handle, "nghttp2_session_callbacks_set_on_header_callback", &lib.set_on_header,
                  &error) &&
      FindNghttp2(handle, "nghttp2_session_callbacks_set_on_frame_recv_callback",
                  &lib.set_on_frame_recv, &error) &&
      FindNghttp2(handle, "nghttp2_session_callbacks_set_on_data_chunk_recv_callback",
                  &lib.set_on_data_chunk_recv, &error) &&
      FindNghttp2(handle, "nghttp2_session_callbacks_set_on_stream_close_callback",
                  &lib.set_on_stream_close, &error) &&
      FindNghttp2(handle, "nghttp2_session_client_new", &lib.session_client_new, &error) &&
      FindNghttp2(handle, "nghttp2_session_del", &lib.session_del, &error) &&
      FindNghttp2(handle, "nghttp2_submit_settings", &lib.submit_settings, &error) &&
      FindNghttp2(handle, "nghttp2_submit_request", &lib.submit_request, &error) &&
      FindNghttp2(handle, "nghttp2_submit_rst_stream", &lib.submit_rst_stream, &error) &&
      FindNghttp2(handle, "nghttp2_session_terminate_session", &lib.terminate_session, &error) &&
      FindNghttp2(handle, "nghttp2_session_mem_recv", &lib.mem_recv, &error) &&
      FindNghttp2(handle, "nghttp2_session_mem_send", &lib.mem_send, &error) &&
      FindNghttp2(handle, "nghttp2_session_want_read", &lib.want_read, &error) &&
      FindNghttp2(handle, "nghttp2_session_want_write", &lib.want_write, &error) &&
      FindNghttp2(handle, "nghttp2_session_get_remote_settings", &lib.get_remote_settings,
                  &error) &&
      FindNghttp2(handle, "nghttp2_session_set_local_window_size", &lib.set_local_window_size,
                  &error) &&
      FindNghttp2(handle, "nghttp2_session_get_stream_user_data", &lib.get_stream_user_data,
                  &error) &&
      FindNghttp2(handle, "nghttp2_session_set_stream_user_data", &lib.set_stream_user_data,
                  &error) &&
      FindNghttp2(handle, "nghttp2_strerror", &lib.strerror, &error) &&
      FindNghttp2(handle, "nghttp2_http2_strerror", &lib.http2_strerror, &error);
  if (!found) return base::Status::Error(error);
  return &lib;
}

}  // namespace

const base::Result<const Nghttp2Library*>& LoadNghttp2() {
  static const base::Result<const Nghttp2Library*> loaded = OpenNghttp2();
  return loaded;
}

}  // namespace kubeclient
