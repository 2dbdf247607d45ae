// The pushgw executable; everything lives in module Gateway.
import Foundation
import Gateway

exit(pushgwMain(Array(CommandLine.arguments.dropFirst())))
