// libsystemd's sd_notify and sd_watchdog_enabled, through libsystemd.so.0 opened only when
// systemd started this process: when neither NOTIFY_SOCKET nor WATCHDOG_USEC is set, both
// calls do what libsystemd's own do then (nothing, and "no watchdog") without the library,
// so a gateway outside systemd maps none of its ~7 libraries.
#ifndef PUSHGW_CSYSTEMDCALLS_H
#define PUSHGW_CSYSTEMDCALLS_H
#include <stdint.h>

/// sd_notify(0, state): > 0 when sent, 0 when there is no systemd to tell, < 0 on an error
/// (-ENOENT also when libsystemd cannot be opened under systemd).
int pushgw_sd_notify(const char *state);
/// sd_watchdog_enabled(0, usec): > 0 and `*usec` set when systemd runs a watchdog for this
/// process, 0 when it does not, < 0 on an error.
int pushgw_sd_watchdog_enabled(uint64_t *usec);
#endif
