"""CPU seconds (user + system) a process has used so far, from /proc/PID/stat.

The one reading of it for the bench: imported by its Python scripts (run with bench/ on
PYTHONPATH), and run as `python3 bench/proc_cpu.py PID` by bench/common.sh's `proc_cpu`."""
import os
import sys


def cpu_seconds(pid):
    # The fields after the command name, which is in parentheses and may hold spaces.
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    print(cpu_seconds(sys.argv[1]))
