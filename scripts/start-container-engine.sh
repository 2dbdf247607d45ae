#!/usr/bin/env bash
# make test's container engine, for the image test (Tests/PushgwProcessTests/ContainerImageTests.swift):
# nothing when one answers; as root, Debian's dockerd started in the background (its log in
# .build/dockerd.log) when it is installed and not running; otherwise a line saying why the
# image test will be skipped. Never fails make test.
cd "$(dirname "$0")/.."
if docker info >/dev/null 2>&1; then echo "container engine: running"; exit 0; fi
if [ "$(id -u)" != 0 ] || ! command -v dockerd >/dev/null || ! command -v docker >/dev/null; then
  echo "container engine: none (needs root and docker.io); ContainerImageTests will be skipped"; exit 0
fi
mkdir -p .build
nohup dockerd > .build/dockerd.log 2>&1 &
for _ in $(seq 1 100); do docker info >/dev/null 2>&1 && { echo "container engine: dockerd started (.build/dockerd.log)"; exit 0; }; sleep 0.2; done
echo "container engine: dockerd did not answer in 20 s (.build/dockerd.log); ContainerImageTests will be skipped"
