// sd_notify and sd_watchdog_enabled: how a service tells systemd it is ready, reloading,
// stopping and alive (Debian's libsystemd-dev).
#include <systemd/sd-daemon.h>
