// libcurl's multi interface (Debian's libcurl4-openssl-dev): the HTTP client of webhook
// deliveries, driven by the process's libevent loop. Its declarations only: the binary does
// not link libcurl; CCurlOptions loads it on first use and every call goes through it, so a
// gateway that never posts maps none of its libraries (a direct call here fails to link).
#include <curl/curl.h>
