// Nghttp2Library: libnghttp2, opened with dlopen the first time the HTTP/2 transport needs it
// (http2_transport.h), and the functions of it the transport calls. A daemon that never talks to
// an API server (standalone mode) never maps it, as for libcurl (curl_library.h).
//
// The library's name is also in the binary's `.vm_dlopen` section, where
// image/runtime_packages.sh finds it to put the library in the image.
//
// LoadNghttp2() is thread-safe; it opens the library once per process, and the library stays
// loaded until the process exits.
#ifndef VOLUMEMANAGER_KUBECLIENT_DL_NGHTTP2_LIBRARY_H_
#define VOLUMEMANAGER_KUBECLIENT_DL_NGHTTP2_LIBRARY_H_

#include <nghttp2/nghttp2.h>

#include "base/status.h"

namespace kubeclient {

struct Nghttp2Library {
  decltype(&nghttp2_session_callbacks_new) callbacks_new;
  decltype(&nghttp2_session_callbacks_del) callbacks_del;
  decltype(&nghttp2_session_callbacks_set_on_header_callback) set_on_header;
  decltype(&nghttp2_session_callbacks_set_on_frame_recv_callback) set_on_frame_recv;
  decltype(&nghttp2_session_callbacks_set_on_data_chunk_recv_callback) set_on_data_chunk_recv;
  decltype(&nghttp2_session_callbacks_set_on_stream_close_callback) set_on_stream_close;
  decltype(&nghttp2_session_client_new) session_client_new;
  decltype(&nghttp2_session_del) session_del;
  decltype(&nghttp2_submit_settings) submit_settings;
  decltype(&nghttp2_submit_request) submit_request;
  decltype(&nghttp2_submit_rst_stream) submit_rst_stream;
  decltype(&nghttp2_session_terminate_session) terminate_session;
  decltype(&nghttp2_session_mem_recv) mem_recv;
  decltype(&nghttp2_session_mem_send) mem_send;
  decltype(&nghttp2_session_want_read) want_read;
  decltype(&nghttp2_session_want_write) want_write;
  decltype(&nghttp2_session_get_remote_settings) get_remote_settings;
  decltype(&nghttp2_session_set_local_window_size) set_local_window_size;
  decltype(&nghttp2_session_get_stream_user_data) get_stream_user_data;
  decltype(&nghttp2_session_set_stream_user_data) set_stream_user_data;
  decltype(&nghttp2_strerror) strerror;
  decltype(&nghttp2_http2_strerror) http2_strerror;
};

// The loaded library, or why it could not be loaded: the same answer for the life of the process.
const base::Result<const Nghttp2Library*>& LoadNghttp2();

}  // namespace kubeclient

#endif  // VOLUMEMANAGER_KUBECLIENT_DL_NGHTTP2_LIBRARY_H_
