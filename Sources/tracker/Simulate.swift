import ArgumentParser
import Simulation

struct Simulate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run seeded cluster scenarios in the deterministic simulator.",
        discussion: "--seed S replays one scenario (add --trace for every event and action); --seeds A..B sweeps a range and exits non-zero on any failure.")

    @Option(help: "Replay one scenario.") var seed: UInt64?
    @Option(help: "Sweep a range of seeds, e.g. 1..1000.") var seeds: String?
    @Flag(help: "Print the trace: time, node, event and the actions it produced.") var trace = false

    func validate() throws {
        guard (seed == nil) != (seeds == nil) else { throw ValidationError("give exactly one of --seed or --seeds") }
    }

    func run() throws {
        if let seed {
            let report = Simulator.run(seed: seed, trace: trace)
            if trace { for line in report.trace { print(line) } }
            print("scenario: \(report.scenario)")
            print(report)
            if !report.passed { throw ExitCode(1) }
            return
        }
        let parts = seeds!.split(separator: ".", omittingEmptySubsequences: true)
        guard parts.count == 2, let a = UInt64(parts[0]), let b = UInt64(parts[1]), a <= b else {
            throw ValidationError("--seeds must look like A..B with A ≤ B")
        }
        var failures = 0
        for s in a...b {
            let report = Simulator.run(seed: s)
            if !report.passed {
                failures += 1
                print(report)
            }
        }
        print("\(b - a + 1 - UInt64(failures)) passed, \(failures) failed")
        if failures > 0 { throw ExitCode(1) }
    }
}
