// libcurl, opened on first use: the binary does not link it (a router that never posts a
// webhook maps none of libcurl's ~25 libraries), so every libcurl function pushgw calls is
// here, called through the library `pushgw_curl_load` opened. Also libcurl's variadic setters
// and getters (curl_easy_setopt, curl_multi_setopt, curl_easy_getinfo), which Swift cannot
// call, as one function per argument type; and the socket-opening callback that refuses
// addresses a webhook must not reach.
//
// Invariant: no other function here may be called before `pushgw_curl_load` returned 0.
#ifndef PUSHGW_CCURLOPTIONS_H
#define PUSHGW_CCURLOPTIONS_H
#include <curl/curl.h>

/// Opens libcurl (libcurl.so.4, Debian's libcurl4) and runs curl_global_init, once per
/// process, from any thread: 0 when libcurl is ready (now or earlier), -1 when it cannot be
/// (then `pushgw_curl_load_error` says why, the same on every later call).
int pushgw_curl_load(void);
/// Why `pushgw_curl_load` failed (dlopen's or dlsym's words), or NULL when it did not.
const char *pushgw_curl_load_error(void);

CURL *pushgw_curl_easy_init(void);
void pushgw_curl_easy_cleanup(CURL *easy);
const char *pushgw_curl_easy_strerror(CURLcode code);
CURLM *pushgw_curl_multi_init(void);
CURLMcode pushgw_curl_multi_cleanup(CURLM *multi);
CURLMcode pushgw_curl_multi_add_handle(CURLM *multi, CURL *easy);
CURLMcode pushgw_curl_multi_remove_handle(CURLM *multi, CURL *easy);
CURLMcode pushgw_curl_multi_socket_action(CURLM *multi, curl_socket_t socket, int flags, int *running);
CURLMsg *pushgw_curl_multi_info_read(CURLM *multi, int *left);
struct curl_slist *pushgw_curl_slist_append(struct curl_slist *list, const char *line);
void pushgw_curl_slist_free_all(struct curl_slist *list);

CURLcode pushgw_easy_setopt_long(CURL *easy, CURLoption option, long value);
CURLcode pushgw_easy_setopt_pointer(CURL *easy, CURLoption option, const void *value);
CURLMcode pushgw_multi_setopt_long(CURLM *multi, CURLMoption option, long value);
CURLMcode pushgw_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *value);
CURLMcode pushgw_multi_setopt_socket_function(CURLM *multi,
    int (*function)(CURL *easy, curl_socket_t socket, int what, void *userp, void *socketp));
CURLMcode pushgw_multi_setopt_timer_function(CURLM *multi, int (*function)(CURLM *multi, long timeout_ms, void *userp));
long pushgw_easy_response_code(CURL *easy);
/// Seconds from the start to the end of the transfer (CURLINFO_TOTAL_TIME).
double pushgw_easy_total_time(CURL *easy);
void *pushgw_easy_private(CURL *easy);
/// Drops the response body (curl would write it to stdout).
CURLcode pushgw_easy_discard_body(CURL *easy);

/// Makes `easy` open its sockets through a check of the address each one connects to, after
/// DNS: a loopback, private (RFC 1918, unique-local fc00::/7), link-local, carrier-grade NAT
/// (100.64/10), unspecified, multicast or broadcast address is refused (the transfer fails
/// with CURLE_COULDNT_CONNECT and `*refused` is set to 1), unless `allow_private` is
/// non-zero. `refused` must outlive the transfer.
CURLcode pushgw_easy_check_addresses(CURL *easy, int allow_private, int *refused);

/// Whether the address is one `pushgw_easy_check_addresses` refuses (1) or not (0).
int pushgw_address_is_private(const struct sockaddr *address);
#endif
