// libcurl's multi interface (Debian's libcurl4-openssl-dev): the HTTP client of webhook
// deliveries, driven by the process's libevent loop.
#include <curl/curl.h>
