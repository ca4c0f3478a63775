import ArgumentParser

struct Simulate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Replay seeded cluster scenarios in the deterministic simulator.")
    @Option var seed: UInt64?
    func run() async throws {
        throw ValidationError("the cluster simulator is not built yet")
    }
}
