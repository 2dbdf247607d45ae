#include "CSystemdCalls.h"
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>

/* libsystemd's two functions, looked up once; both NULL outside systemd or when the library
 * cannot be opened. Written only inside pthread_once, read after it: no lock needed. */
static int (*notify)(int unset_environment, const char *state);
static int (*watchdog_enabled)(int unset_environment, uint64_t *usec);
static int under_systemd;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
    under_systemd = getenv("NOTIFY_SOCKET") != NULL || getenv("WATCHDOG_USEC") != NULL;
    if (!under_systemd) return;
    void *library = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!library) return;
    notify = (int (*)(int, const char *))dlsym(library, "sd_notify");
    watchdog_enabled = (int (*)(int, uint64_t *))dlsym(library, "sd_watchdog_enabled");
}

int pushgw_sd_notify(const char *state) {
    pthread_once(&load_once, load);
    if (!under_systemd) return 0;
    return notify ? notify(0, state) : -ENOENT;
}

int pushgw_sd_watchdog_enabled(uint64_t *usec) {
    pthread_once(&load_once, load);
    if (!under_systemd) return 0;
    return watchdog_enabled ? watchdog_enabled(0, usec) : -ENOENT;
}
