// pushgw-bench: the pushgw side of `make bench`. bench/run.sh runs it beside the reference
// tools (h2load, redis-benchmark) against the same servers and prints the ratios.
import APNs
import EventLoop
import Foundation
import Glibc

BenchCommand.main(Array(CommandLine.arguments.dropFirst()))
