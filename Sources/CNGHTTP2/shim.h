#include <features.h>
#include <nghttp2/nghttp2.h>
