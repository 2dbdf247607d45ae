// features.h first: the libevent adapter reaches event2/*, see CLibEvent/shim.h.
#include <features.h>
#include <hiredis/hiredis.h>
#include <hiredis/async.h>
#include <hiredis/adapters/libevent.h>
