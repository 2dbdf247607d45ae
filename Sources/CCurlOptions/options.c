#include "CCurlOptions.h"
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* libcurl's functions, looked up once in the library `load` opened; all set, or `failure` says
 * why not. Written only inside pthread_once, read after it: no lock needed. */
static struct {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *easy);
    CURLcode (*easy_setopt)(CURL *easy, CURLoption option, ...);
    CURLcode (*easy_getinfo)(CURL *easy, CURLINFO info, ...);
    const char *(*easy_strerror)(CURLcode code);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *multi);
    CURLMcode (*multi_add_handle)(CURLM *multi, CURL *easy);
    CURLMcode (*multi_remove_handle)(CURLM *multi, CURL *easy);
    CURLMcode (*multi_setopt)(CURLM *multi, CURLMoption option, ...);
    CURLMcode (*multi_socket_action)(CURLM *multi, curl_socket_t socket, int flags, int *running);
    CURLMsg *(*multi_info_read)(CURLM *multi, int *left);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *line);
    void (*slist_free_all)(struct curl_slist *list);
} curl;
static char failure[512];
static int loaded = -1;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        snprintf(failure, sizeof failure, "libcurl (Debian's libcurl4) cannot be opened: %s", dlerror());
        return;
    }
    struct { const char *name; void **slot; } symbols[] = {
        {"curl_global_init", (void **)&curl.global_init},
        {"curl_easy_init", (void **)&curl.easy_init},
        {"curl_easy_cleanup", (void **)&curl.easy_cleanup},
        {"curl_easy_setopt", (void **)&curl.easy_setopt},
        {"curl_easy_getinfo", (void **)&curl.easy_getinfo},
        {"curl_easy_strerror", (void **)&curl.easy_strerror},
        {"curl_multi_init", (void **)&curl.multi_init},
        {"curl_multi_cleanup", (void **)&curl.multi_cleanup},
        {"curl_multi_add_handle", (void **)&curl.multi_add_handle},
        {"curl_multi_remove_handle", (void **)&curl.multi_remove_handle},
        {"curl_multi_setopt", (void **)&curl.multi_setopt},
        {"curl_multi_socket_action", (void **)&curl.multi_socket_action},
        {"curl_multi_info_read", (void **)&curl.multi_info_read},
        {"curl_slist_append", (void **)&curl.slist_append},
        {"curl_slist_free_all", (void **)&curl.slist_free_all},
    };
    for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
        *symbols[i].slot = dlsym(library, symbols[i].name);
        if (!*symbols[i].slot) {
            snprintf(failure, sizeof failure, "libcurl has no %s: %s", symbols[i].name, dlerror());
            return;
        }
    }
    CURLcode code = curl.global_init(CURL_GLOBAL_DEFAULT);
    if (code != CURLE_OK) {
        snprintf(failure, sizeof failure, "curl_global_init failed: %s", curl.easy_strerror(code));
        return;
    }
    loaded = 0;
}

int pushgw_curl_load(void) {
    pthread_once(&load_once, load);
    return loaded;
}
const char *pushgw_curl_load_error(void) {
    pthread_once(&load_once, load);
    return loaded == 0 ? NULL : failure;
}

CURL *pushgw_curl_easy_init(void) { return curl.easy_init(); }
void pushgw_curl_easy_cleanup(CURL *easy) { curl.easy_cleanup(easy); }
const char *pushgw_curl_easy_strerror(CURLcode code) { return curl.easy_strerror(code); }
CURLM *pushgw_curl_multi_init(void) { return curl.multi_init(); }
CURLMcode pushgw_curl_multi_cleanup(CURLM *multi) { return curl.multi_cleanup(multi); }
CURLMcode pushgw_curl_multi_add_handle(CURLM *multi, CURL *easy) { return curl.multi_add_handle(multi, easy); }
CURLMcode pushgw_curl_multi_remove_handle(CURLM *multi, CURL *easy) { return curl.multi_remove_handle(multi, easy); }
CURLMcode pushgw_curl_multi_socket_action(CURLM *multi, curl_socket_t socket, int flags, int *running) {
    return curl.multi_socket_action(multi, socket, flags, running);
}
CURLMsg *pushgw_curl_multi_info_read(CURLM *multi, int *left) { return curl.multi_info_read(multi, left); }
struct curl_slist *pushgw_curl_slist_append(struct curl_slist *list, const char *line) { return curl.slist_append(list, line); }
void pushgw_curl_slist_free_all(struct curl_slist *list) { curl.slist_free_all(list); }

CURLcode pushgw_easy_setopt_long(CURL *easy, CURLoption option, long value) { return curl.easy_setopt(easy, option, value); }
CURLcode pushgw_easy_setopt_pointer(CURL *easy, CURLoption option, const void *value) {
    return curl.easy_setopt(easy, option, value);
}
CURLMcode pushgw_multi_setopt_long(CURLM *multi, CURLMoption option, long value) { return curl.multi_setopt(multi, option, value); }
CURLMcode pushgw_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *value) {
    return curl.multi_setopt(multi, option, value);
}
CURLMcode pushgw_multi_setopt_socket_function(CURLM *multi,
    int (*function)(CURL *easy, curl_socket_t socket, int what, void *userp, void *socketp)) {
    return curl.multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, function);
}
CURLMcode pushgw_multi_setopt_timer_function(CURLM *multi, int (*function)(CURLM *multi, long timeout_ms, void *userp)) {
    return curl.multi_setopt(multi, CURLMOPT_TIMERFUNCTION, function);
}
long pushgw_easy_response_code(CURL *easy) {
    long code = 0;
    curl.easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
    return code;
}
double pushgw_easy_total_time(CURL *easy) {
    double seconds = 0;
    curl.easy_getinfo(easy, CURLINFO_TOTAL_TIME, &seconds);
    return seconds;
}
void *pushgw_easy_private(CURL *easy) {
    char *value = NULL;
    curl.easy_getinfo(easy, CURLINFO_PRIVATE, &value);
    return value;
}

static size_t discard(char *data, size_t size, size_t count, void *user) {
    (void)data; (void)user;
    return size * count;
}
CURLcode pushgw_easy_discard_body(CURL *easy) { return curl.easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard); }

static int ipv4_is_private(uint32_t a) {
    return (a >> 24) == 0            /* 0.0.0.0/8 this network */
        || (a >> 24) == 10           /* 10/8 */
        || (a >> 24) == 127          /* loopback */
        || (a >> 22) == (100u << 2 | 1) /* 100.64/10 carrier-grade NAT */
        || (a >> 16) == (169u << 8 | 254) /* link-local */
        || (a >> 20) == (172u << 4 | 1)   /* 172.16/12 */
        || (a >> 16) == (192u << 8 | 168) /* 192.168/16 */
        || (a >> 28) >= 14;          /* multicast, reserved, broadcast */
}

int pushgw_address_is_private(const struct sockaddr *address) {
    if (address->sa_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)address;
        return ipv4_is_private(ntohl(v4->sin_addr.s_addr));
    }
    if (address->sa_family == AF_INET6) {
        const struct in6_addr *v6 = &((const struct sockaddr_in6 *)address)->sin6_addr;
        const unsigned char *b = v6->s6_addr;
        if (IN6_IS_ADDR_V4MAPPED(v6) || IN6_IS_ADDR_V4COMPAT(v6)) {
            uint32_t a = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
            return ipv4_is_private(a);
        }
        return IN6_IS_ADDR_LOOPBACK(v6) || IN6_IS_ADDR_UNSPECIFIED(v6) || IN6_IS_ADDR_LINKLOCAL(v6)
            || IN6_IS_ADDR_MULTICAST(v6) || (b[0] & 0xfe) == 0xfc /* fc00::/7 unique local */
            || IN6_IS_ADDR_SITELOCAL(v6);
    }
    return 1;  /* Unix sockets and anything else: never a webhook's address */
}

static curl_socket_t open_checked(void *clientp, curlsocktype purpose, struct curl_sockaddr *address) {
    (void)purpose;
    int *refused = clientp;
    if (pushgw_address_is_private(&address->addr)) {
        *refused = 1;
        return CURL_SOCKET_BAD;
    }
    return socket(address->family, address->socktype, address->protocol);
}

CURLcode pushgw_easy_check_addresses(CURL *easy, int allow_private, int *refused) {
    *refused = 0;
    if (allow_private) return CURLE_OK;
    CURLcode code = curl.easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, open_checked);
    if (code != CURLE_OK) return code;
    return curl.easy_setopt(easy, CURLOPT_OPENSOCKETDATA, refused);
}
