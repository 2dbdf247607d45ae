// sd_notify and sd_watchdog_enabled: how a service tells systemd it is ready, reloading,
// stopping and alive (Debian's libsystemd-dev). Declarations only: the binary does not link
// libsystemd; CSystemdCalls opens it under systemd and calls it.
#include <systemd/sd-daemon.h>
