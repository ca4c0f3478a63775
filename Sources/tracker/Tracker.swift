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
    static func main() async {
        let arguments: [String]
        do { arguments = try ConfigFile.expand(Array(CommandLine.arguments.dropFirst())) } catch {
            FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
            Foundation.exit(64)
        }
        await main(arguments)
    }
}
