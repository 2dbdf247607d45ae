#include "CCurlOptions.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

CURLcode pushgw_easy_setopt_long(CURL *easy, CURLoption option, long value) { return curl_easy_setopt(easy, option, value); }
CURLcode pushgw_easy_setopt_pointer(CURL *easy, CURLoption option, const void *value) {
    return curl_easy_setopt(easy, option, value);
}
CURLMcode pushgw_multi_setopt_long(CURLM *multi, CURLMoption option, long value) { return curl_multi_setopt(multi, option, value); }
CURLMcode pushgw_multi_setopt_pointer(CURLM *multi, CURLMoption option, void *value) {
    return curl_multi_setopt(multi, option, value);
}
CURLMcode pushgw_multi_setopt_socket_function(CURLM *multi,
    int (*function)(CURL *easy, curl_socket_t socket, int what, void *userp, void *socketp)) {
    return curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, function);
}
CURLMcode pushgw_multi_setopt_timer_function(CURLM *multi, int (*function)(CURLM *multi, long timeout_ms, void *userp)) {
    return curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, function);
}
long pushgw_easy_response_code(CURL *easy) {
    long code = 0;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
    return code;
}
double pushgw_easy_total_time(CURL *easy) {
    double seconds = 0;
    curl_easy_getinfo(easy, CURLINFO_TOTAL_TIME, &seconds);
    return seconds;
}
void *pushgw_easy_private(CURL *easy) {
    char *value = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, &value);
    return value;
}

static size_t discard(char *data, size_t size, size_t count, void *user) {
    (void)data; (void)user;
    return size * count;
}
CURLcode pushgw_easy_discard_body(CURL *easy) { return curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard); }

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
    CURLcode code = curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, open_checked);
    if (code != CURLE_OK) return code;
    return curl_easy_setopt(easy, CURLOPT_OPENSOCKETDATA, refused);
}
