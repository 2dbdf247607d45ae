#!/usr/bin/env bash
# Checks what ships for deployment without a container engine or a systemd host. Run by the
# tests (Tests/PushgwProcessTests/DeploymentTests.swift) after `make test` built the image's binary
# with the image's own build step (docker/build-pushgw.sh .build/image/pushgw debug).
#
#   scripts/check-deploy.sh image BIN    BIN starts, and links only libraries of the `runtime:`
#                                        packages of scripts/debian-packages.txt
#   scripts/check-deploy.sh compose      docker/compose*.yaml parse; the config they mount exists
#   scripts/check-deploy.sh secrets BIN  uid 10001 (the image's user) reads secrets set up the
#                                        way docker/README.md says (needs root or sudo)
#   scripts/check-deploy.sh systemd      systemd-analyze verify deploy/systemd/pushgw.service
#   scripts/check-deploy.sh prometheus   promtool check rules + test rules on deploy/prometheus; every
#                                        rule tested, with a runbook_url to its docs/operations.md section
#   scripts/check-deploy.sh dockerignore the build context leaves out .git, .build and secrets
#
# Exit 0: passed; 1: failed (the reason on stderr); 77: cannot run here (the reason on stderr).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
fail() { echo "check-deploy: $*" >&2; exit 1; }
skip() { echo "check-deploy: skipped: $*" >&2; exit 77; }
packages() { sed -n "s/^$1: *//p" scripts/debian-packages.txt; }

check_image() {
  local bin=${1:?usage: check-deploy.sh image BIN}
  [ -x "$bin" ] || fail "$bin does not exist: make test builds it with docker/build-pushgw.sh $bin debug"
  local runtime libs=() lib path pkg bad=()
  runtime=" $(packages runtime) "
  local ldd_out
  # What the binary itself needs: a library the caller preloads (make test runs the suite under
  # stdbuf, which preloads libstdbuf.so) would otherwise be listed as if the binary linked it.
  ldd_out=$(env -u LD_PRELOAD ldd "$bin") || fail "ldd $bin failed"
  if grep -q "not found" <<<"$ldd_out"; then fail "$bin needs libraries that are missing: $(grep 'not found' <<<"$ldd_out" | tr -s ' \t' ' ')"; fi
  while read -r path; do libs+=("$path"); done < <(awk '/=>/ { print $3 } !/=>/ && $1 ~ /^\// { print $1 }' <<<"$ldd_out")
  for lib in "${libs[@]}"; do
    path=$(readlink -f "$lib")
    pkg=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1) || true
    [ -n "$pkg" ] || pkg=$(dpkg -S "$lib" 2>/dev/null | head -1 | cut -d: -f1) || true
    if [ -z "$pkg" ] || [[ "$runtime" != *" $pkg "* ]]; then bad+=("$lib (${pkg:-no Debian package})"); fi
  done
  [ ${#bad[@]} -eq 0 ] || fail "$bin links libraries outside the runtime: packages of scripts/debian-packages.txt: ${bad[*]}"
  "$bin" --help >/dev/null || fail "$bin --help did not start"
  echo "image: $bin starts and links ${#libs[@]} libraries, all from the runtime packages: $(tr -s ' ' <<<"$runtime")"
}

check_compose() {
  python3 - "$root/docker" <<'PY'
import os, sys, yaml
here = sys.argv[1]
def load(name):
    with open(os.path.join(here, name)) as f:
        return yaml.safe_load(f)
def fail(msg):
    sys.exit(f"check-deploy: {msg}")
base, sim = load("compose.yaml"), load("compose.simulator.yaml")
services = base.get("services") or fail("compose.yaml has no services")
gw, redis = services.get("pushgw") or fail("compose.yaml has no pushgw service"), services.get("redis") or fail("no redis service")
cmd = gw.get("command") or fail("pushgw has no command")
config = cmd[cmd.index("--config") + 1] if "--config" in cmd else fail("pushgw's command names no --config")
def mounts(service):
    out = {}
    for v in service.get("volumes", []):
        parts = v.split(":")
        if parts[0].startswith("."):
            out[parts[1]] = os.path.normpath(os.path.join(here, parts[0]))
    return out
m = mounts(gw)
source = m.get(config) or fail(f"pushgw's config {config} is not mounted from this folder")
os.path.isfile(source) or fail(f"the config compose mounts, {source}, does not exist")
with open(os.path.join(here, "Dockerfile")) as f:
    dockerfile = f.read()
f"COPY docker/{os.path.basename(source)} {config}" in dockerfile or fail(f"the image does not carry {source} as {config}")
secrets_dir = os.path.join(os.path.dirname(config), "secrets")
secrets_dir in m or fail(f"compose mounts no {secrets_dir} (the config's relative secret paths)")
for name, s in (("pushgw", gw), ("redis", redis)):
    s.get("restart") in ("always", "unless-stopped", "on-failure") or fail(f"{name} has no restart policy")
any(str(p).endswith(":6379") for p in redis.get("ports", [])) or fail("redis publishes no port for producers outside compose")
gw.get("depends_on", {}).get("redis", {}).get("condition") == "service_healthy" or fail("pushgw does not wait for a healthy redis")
healthcheck = dockerfile.split("HEALTHCHECK", 1)[-1].split("\n\n")[0]
"/healthz" in healthcheck and "/readyz" not in healthcheck or fail("the image's HEALTHCHECK does not ask /healthz (liveness; docs/operations.md, Readiness)")
gw.get("read_only") is True or fail("pushgw's root filesystem is not read_only (it writes nothing there)")
"ALL" in gw.get("cap_drop", []) or fail("pushgw does not drop every capability (cap_drop: [ALL])")
"no-new-privileges:true" in gw.get("security_opt", []) or fail("pushgw may gain privileges (security_opt: no-new-privileges:true)")
grace = str(gw.get("stop_grace_period", "10s")).rstrip("s")
int(grace) > 10 or fail("stop_grace_period leaves the 10 s drain no room")
ssvc = sim.get("services", {})
simulator = ssvc.get("apns-simulator") or fail("compose.simulator.yaml has no apns-simulator")
scmd = simulator["command"]
sconfig = scmd[scmd.index("--config") + 1]
os.path.isfile(mounts(simulator).get(sconfig, "")) or fail(f"the simulator's config {sconfig} is not mounted from an existing file")
env = ssvc.get("pushgw", {}).get("environment", {})
env.get("PUSHGW_APNS_PRODUCTION_ENDPOINT") or fail("the override does not point pushgw at the simulator")
print(f"compose: pushgw reads {config} = {os.path.relpath(source, os.path.dirname(here))}; restart policies, redis port, "
      f"/healthz health check, a read-only root with no capabilities and the simulator override are in place")
PY
}

check_secrets() {
  local bin=${1:?usage: check-deploy.sh secrets BIN}
  local as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    sudo -n true 2>/dev/null || skip "needs root or password-less sudo to give files to uid 10001"
    as_root=(sudo -n)
  fi
  local work etc
  work=$(mktemp -d)
  trap '"${as_root[@]}" rm -rf "$work"' RETURN
  chmod 755 "$work"
  # The container's /etc/pushgw: the config compose mounts, and docker/secrets/ made as
  # docker/README.md says (a .p8 key, an admin token; owned by 10001, directory 700, files 600).
  etc=$work/etc/pushgw
  mkdir -p "$etc/secrets"
  cp docker/pushgw.json "$etc/pushgw.json"
  chmod 755 "$work/etc" "$etc"
  chmod 644 "$etc/pushgw.json"
  scripts/make-pki.sh "$work/pki" >/dev/null
  cp "$work/pki/AuthKey.p8" "$etc/secrets/AuthKey.p8"
  openssl rand -hex 32 > "$etc/secrets/admin-token"
  chmod 600 "$etc/secrets"/*
  # First as config/README.md alone would leave them (chmod 600, owned by whoever made
  # them): the image's user must be refused, or this check proves nothing.
  if "${as_root[@]}" setpriv --reuid 10001 --regid 10001 --clear-groups "$bin" config check --config "$etc/pushgw.json" >/dev/null 2>&1; then
    fail "uid 10001 read secrets owned by $(id -un) with mode 600: the check below would prove nothing"
  fi
  "${as_root[@]}" chown -R 10001:10001 "$etc/secrets"
  "${as_root[@]}" chmod 700 "$etc/secrets"
  local out
  out=$("${as_root[@]}" setpriv --reuid 10001 --regid 10001 --clear-groups "$bin" config check --config "$etc/pushgw.json" 2>&1) \
    || fail "uid 10001 cannot use the config with secrets set up as docker/README.md says: $out"
  grep -q "usable" <<<"$out" || fail "config check did not say usable: $out"
  grep -q "readable by group or others" <<<"$out" && fail "config check warns about the secrets' mode: $out"
  echo "secrets: as uid 10001: $out"
}

check_systemd() {
  command -v systemd-analyze >/dev/null || fail "systemd-analyze missing (make test installs the deploy group: systemd)"
  local unit=deploy/systemd/pushgw.service work out
  # Hardening the unit must keep (docs: deploy/README.md).
  for line in "User=pushgw" "NoNewPrivileges=yes" "ProtectSystem=strict" "ProtectHome=yes" "PrivateTmp=yes" \
              "CapabilityBoundingSet=" "ExecReload=/bin/kill -HUP \$MAINPID" "KillSignal=SIGTERM"; do
    grep -qxF "$line" "$unit" || fail "$unit lacks $line"
  done
  local stop drain
  stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s\{0,1\}$/\1/p' "$unit")
  drain=$(sed -n 's/^ExecStart=.*--drain-ms \([0-9]*\).*/\1/p' "$unit")
  drain=${drain:-10000}
  [ -n "$stop" ] && [ "$((stop * 1000))" -gt "$drain" ] || fail "$unit: TimeoutStopSec must exceed the drain time ($drain ms)"
  grep -q "^u pushgw " deploy/systemd/pushgw.sysusers || fail "deploy/systemd/pushgw.sysusers does not create the unit's user"
  # systemd-analyze verify needs the unit's commands and the units it is ordered after, but
  # no running systemd: a scratch root with the host's unit files and stand-ins for the
  # binaries the unit names (this host has no /usr/local/bin/pushgw).
  work=$(mktemp -d)
  trap 'rm -rf "$work"' RETURN
  mkdir -p "$work/etc/systemd/system" "$work/usr/lib/systemd" "$work/usr/local/bin" "$work/bin"
  cp -r /lib/systemd/system "$work/usr/lib/systemd/"
  cp "$unit" "$work/etc/systemd/system/"
  printf '#!/bin/sh\n' > "$work/usr/local/bin/pushgw"
  chmod 755 "$work/usr/local/bin/pushgw"
  cp /bin/kill "$work/bin/kill"
  out=$(systemd-analyze verify --man=no --root="$work" pushgw.service 2>&1) || fail "systemd-analyze verify: $out"
  [ -z "$out" ] || fail "systemd-analyze verify complained: $out"
  echo "systemd: $unit verifies (systemd-analyze $(systemd-analyze --version | head -1 | cut -d' ' -f2)), hardening in place, stop timeout ${stop}s > drain ${drain} ms"
}

check_prometheus() {
  local promtool=$root/.build/tools/promtool
  [ -x "$promtool" ] || fail "$promtool missing (make test takes it out of Debian's prometheus package)"
  (cd deploy/prometheus && "$promtool" check rules pushgw-alerts.yml && "$promtool" test rules pushgw-alerts.test.yml) 2>&1 \
    || fail "promtool refused deploy/prometheus"
  # Every rule has a unit test and a runbook: its runbook_url is its own section of
  # docs/operations.md's "Runbook", and that section names no alert that is not a rule.
  python3 - <<'PY'
import re, sys, yaml
rules = [r for g in yaml.safe_load(open("deploy/prometheus/pushgw-alerts.yml"))["groups"] for r in g["rules"] if "alert" in r]
tests = {t["alertname"] for case in yaml.safe_load(open("deploy/prometheus/pushgw-alerts.test.yml"))["tests"]
         for t in case.get("alert_rule_test", [])}
doc = open("docs/operations.md").read()
runbook = re.search(r"^## Runbook\n(.*?)(?=^## |\Z)", doc, re.S | re.M)
runbook or sys.exit("check-deploy: docs/operations.md has no \"## Runbook\" section")
sections = re.findall(r"^### (\S+)\s*$", runbook.group(1), re.M)
problems = []
for r in rules:
    name = r["alert"]
    want = f"docs/operations.md#{name.lower()}"
    if r.get("annotations", {}).get("runbook_url") != want:
        problems.append(f"{name}: runbook_url is not {want}")
    if name not in sections:
        problems.append(f"{name}: no \"### {name}\" in docs/operations.md, Runbook")
    if name not in tests:
        problems.append(f"{name}: no test in pushgw-alerts.test.yml")
problems += [f"docs/operations.md, Runbook: ### {s} is not an alert rule" for s in sections if s not in {r["alert"] for r in rules}]
if problems:
    sys.exit("check-deploy: " + "; ".join(problems))
print(f"prometheus: {len(rules)} rules, each with a unit test and a runbook section")
PY
}

check_dockerignore() {
  [ -f .dockerignore ] || fail "no .dockerignore: the build context would send .git, .build and secrets"
  python3 - <<'PY'
import fnmatch, sys
patterns = [l.strip() for l in open(".dockerignore") if l.strip() and not l.startswith("#")]
def ignored(path):
    parts = path.split("/")
    for p in patterns:
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if fnmatch.fnmatch(prefix, p) or (p.startswith("**/") and fnmatch.fnmatch(prefix.split("/")[-1], p[3:])):
                return True
    return False
must = [".git/HEAD", ".build/debug/pushgw", "config/demo-secrets/AuthKey.p8", "docker/secrets/AuthKey.p8",
        "docker/secrets/admin-token", "config/secrets/beta-voip.key", "bench/out/x"]
keep = ["Package.swift", "Sources/GatewayConfiguration/Config.swift", "Tests/GatewayTestSupport/ConfigFixture.swift", "bench/run.sh",
        "scripts/debian-packages.txt", "docker/build-pushgw.sh", "docker/pushgw.json", "VERSION", "BUILD-COMMIT",
        "Plugins/BuildVersion/BuildVersion.swift", "scripts/build-version.sh"]
wrong = [p for p in must if not ignored(p)] + [f"{p} (needed by the build)" for p in keep if ignored(p)]
if wrong:
    sys.exit("check-deploy: .dockerignore: " + ", ".join(wrong))
print("dockerignore: the context leaves out .git, .build and secrets, and keeps what the build copies")
PY
}

case "${1:-}" in
  image) check_image "${2:-}" ;;
  compose) check_compose ;;
  secrets) check_secrets "${2:-}" ;;
  systemd) check_systemd ;;
  prometheus) check_prometheus ;;
  dockerignore) check_dockerignore ;;
  *) echo "usage: scripts/check-deploy.sh image BIN | compose | secrets BIN | systemd | prometheus | dockerignore" >&2; exit 2 ;;
esac
