import ArgumentParser

@main
struct Tracker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tracker",
        abstract: "A replicated BitTorrent UDP tracker (BEP 15, BEP 23).",
        subcommands: [Run.self, Client.self, Bench.self, Simulate.self, Keygen.self],
        defaultSubcommand: nil)
}
