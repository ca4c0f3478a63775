import ArgumentParser
import Foundation

@main
struct Tracker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tracker",
        abstract: "A replicated BitTorrent UDP tracker (BEP 15, BEP 23).",
        version: BuildInfo.line,
        subcommands: [Run.self, Client.self, Admin.self, Bench.self, Simulate.self, Keygen.self, Config.self],
        defaultSubcommand: nil)

    /// `run --config FILE` puts the file's settings before the command line's.
    ///
    /// A setting `run` refuses, in the file or on the command line, ends the process with
    /// `configurationError` (EX_CONFIG): the unit names it in `RestartPreventExitStatus=`,
    /// so systemd does not restart a node that would refuse the same file again, and the
    /// journal keeps the message naming the key. Anything else that stops `run` (a port
    /// in use, a broker refusing it) may pass, and exits 1 or the node's own status.
    static func main() async {
        let arguments: [String]
        do { arguments = try ConfigFile.expand(Array(CommandLine.arguments.dropFirst())) } catch {
            FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
            Foundation.exit(configurationError)
        }
        guard arguments.first == "run" else { return await main(arguments) }
        do {
            var command = try parseAsRoot(arguments)
            if var async = command as? AsyncParsableCommand { try await async.run() } else { try command.run() }
        } catch {
            guard exitCode(for: error) == .validationFailure else { exit(withError: error) }
            FileHandle.standardError.write(Data("Error: \(message(for: error))\n".utf8))
            Foundation.exit(configurationError)
        }
    }

    /// EX_CONFIG from sysexits.h.
    static let configurationError: Int32 = 78
}
