// The pushgw executable; the command line and the process's wiring live in PushgwCommands.
import Foundation
import PushgwCommands

exit(pushgwMain(Array(CommandLine.arguments.dropFirst())))
