import ArgumentParser
import Foundation
import Simulation

struct Simulate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run seeded cluster scenarios in the deterministic simulator.",
        discussion: """
            --seed S replays one scenario (add --trace for every event and action; --shrink reduces a failing one to a \
            smaller scenario that fails the same way and prints it as a line). --scenario 'LINE' runs such a line. \
            --seeds A..B sweeps a range in child processes (--jobs at once): a node that traps is that seed's \
            failure and the sweep goes on; --coverage prints how often each protocol path was taken. Exits non-zero on \
            any failure. --vary-hashing runs each chunk twice, under two hashing seeds, and fails seeds whose traces \
            differ (a run that depends on a Dictionary's or Set's order cannot be replayed).
            """)

    @Option(help: "Replay one scenario.") var seed: UInt64?
    @Option(help: "Sweep a range of seeds, e.g. 1..1000.") var seeds: String?
    @Option(help: "Run the scenario a --shrink printed (key=value words).") var scenario: String?
    @Flag(help: "Print the trace: time, node, event and the actions it produced.") var trace = false
    @Flag(help: "Reduce a failing scenario to a smaller one with the same failure.") var shrink = false
    @Flag(help: "Print how often each protocol path was taken (and fail if a required one never was).") var coverage = false
    @Option(help: "Child processes at once for --seeds (default: the number of cores).") var jobs: Int?
    @Flag(help: "With --seeds: run every seed under two hashing seeds and fail those whose traces differ.") var varyHashing = false
    @Flag(inversion: .prefixedNo,
          help: "With --seeds: print progress (seeds done, rate, time left) and each failure as it is found, on standard error (default: when it is a terminal).")
    var progress: Bool?
    /// Runs seeds in this process, one `done S` line after each (the parent's protocol).
    @Flag(help: .hidden) var worker = false

    func validate() throws {
        guard [seed != nil, seeds != nil, scenario != nil].filter({ $0 }).count == 1 else {
            throw ValidationError("give exactly one of --seed, --seeds or --scenario")
        }
        if shrink && seeds != nil { throw ValidationError("--shrink takes one scenario: --seed or --scenario") }
        if varyHashing && seeds == nil { throw ValidationError("--vary-hashing takes a sweep: --seeds") }
        if let jobs, jobs < 1 || jobs > 256 { throw ValidationError("--jobs must be between 1 and 256") }
    }

    func run() throws {
        if let seeds {
            let parts = seeds.split(separator: ".", omittingEmptySubsequences: true)
            guard parts.count == 2, let a = UInt64(parts[0]), let b = UInt64(parts[1]), a <= b else {
                throw ValidationError("--seeds must look like A..B with A ≤ B")
            }
            if worker { return runWorker(a...b) }
            return try sweep(a...b)
        }
        let chosen: Scenario
        if let seed {
            chosen = Scenario(seed: seed)
        } else {
            do { chosen = try Scenario(line: scenario ?? "") } catch { throw ValidationError("--scenario: \(error)") }
        }
        if shrink { return try shrinkAndPrint(chosen) }
        var sim = Simulator(scenario: chosen, trace: trace)
        let report = sim.run()
        if trace { for line in report.trace { print(line) } }
        print("scenario: \(report.scenario)")
        print("line: \(report.scenario.line)")
        print(report)
        if coverage { print(report.coverage.table) }
        if !report.passed { throw ExitCode(1) }
    }

    func shrinkAndPrint(_ scenario: Scenario) throws {
        guard let outcome = Shrinker.shrink(scenario, progress: { print("  kept: \($0)") }) else {
            print("the scenario passes: nothing to shrink")
            return
        }
        var before = Simulator(scenario: scenario)
        let original = before.run()
        print("before: \(size(outcome.original, original))")
        print("after:  \(size(outcome.shrunk, outcome.report)) (\(outcome.runs) runs)")
        print("violation: \(outcome.report.violation ?? "")")
        print("replay: swift run tracker simulate --scenario '\(outcome.shrunk.line)' --trace")
        throw ExitCode(1)
    }

    func size(_ s: Scenario, _ r: SimulationReport) -> String {
        "\(s.nodes) nodes, \(s.faults.count) faults, \(s.operatorActions.count) operator actions, \(s.peers) peers, "
            + "\(s.torrents) torrents, faults until \(s.faultEnd.milliseconds - Scenario.start.milliseconds) ms, loss \(s.lossRate), "
            + "adversary \(s.adversary.map(\.description) ?? "none"), \(r.events) events"
    }

    /// The child's side: every seed in order, a line after each, flushed, so a trap
    /// leaves the parent knowing which seed was running.
    func runWorker(_ range: ClosedRange<UInt64>) {
        var total = Coverage()
        for s in range {
            let report = Simulator.run(seed: s)
            total.add(report.coverage)
            if !report.passed { print(report) }
            print("done \(s) \(String(report.traceHash, radix: 16))")
            fflush(nil)
        }
        print("coverage \(total.encoded)")
        fflush(nil)
    }

    /// The parent's side: chunks of seeds in child processes, `--jobs` at once.
    func sweep(_ range: ClosedRange<UInt64>) throws {
        let jobs = self.jobs ?? ProcessInfo.processInfo.activeProcessorCount
        let chunk: UInt64 = 200
        var pending: [ClosedRange<UInt64>] = []
        var start = range.lowerBound
        while true {
            let end = start &+ (chunk - 1) < start ? range.upperBound : min(range.upperBound, start + chunk - 1)
            pending.append(start...end)
            if end == range.upperBound { break }
            start = end + 1
        }
        let count = range.upperBound - range.lowerBound + 1
        let state = SweepState(pending: pending.reversed(), total: count, progress: progress ?? (isatty(2) != 0))
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        DispatchQueue.concurrentPerform(iterations: jobs) { _ in
            while let seeds = state.next() {
                let (output, normal, how) = Self.runChild(executable: executable, seeds: seeds,
                                                          deterministicHashing: varyHashing ? false : nil)
                state.record(seeds, output, normal, how)
                if varyHashing {
                    // Swift seeds its hashing per process unless told otherwise.
                    let (fixed, _, _) = Self.runChild(executable: executable, seeds: seeds, deterministicHashing: true)
                    state.compareHashOrder(seeds, fixed)
                }
            }
        }
        let ledger = state.ledger
        let failures = ledger.failures.sorted { $0.seed < $1.seed }
        for f in failures { print(f.text) }
        let seconds = max(Date().timeIntervalSince(state.started), 0.001)
        print("rate: \(Int(Double(count) / seconds * 60)) scenarios a minute (\(count) in \(Int(seconds)) s, \(jobs) jobs)")
        print("\(count - UInt64(failures.count)) passed, \(failures.count) failed")
        if coverage {
            print(ledger.coverage.table)
            let short = ledger.coverage.shortfalls
            if !short.isEmpty {
                print("required paths not reached often enough: \(short.joined(separator: "; "))")
                throw ExitCode(1)
            }
        }
        if !failures.isEmpty { throw ExitCode(1) }
    }

    /// Runs one chunk in a child: what it printed, whether it ended normally, and how not.
    static func runChild(executable: String, seeds: ClosedRange<UInt64>, deterministicHashing: Bool? = nil) -> (String, Bool, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["simulate", "--seeds", "\(seeds.lowerBound)..\(seeds.upperBound)", "--worker"]
        // A trap is expected here and reported by seed: no symbolicated backtrace (which
        // takes seconds per trap), its message on stderr is enough.
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        // nil: as this process was started; true: one fixed hashing seed; false: the usual per-process one.
        switch deterministicHashing {
        case true?: environment["SWIFT_DETERMINISTIC_HASHING"] = "1"
        case false?: environment["SWIFT_DETERMINISTIC_HASHING"] = nil
        case nil: break
        }
        process.environment = environment
        let pipe = Pipe()
        process.standardOutput = pipe
        do { try process.run() } catch { return ("", false, "could not start \(executable): \(error)") }
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let signalled = process.terminationReason == .uncaughtSignal
        return (output, !signalled, signalled ? "signal \(process.terminationStatus)" : "status \(process.terminationStatus)")
    }

    /// What the sweep's threads share.
    final class SweepState: @unchecked Sendable {
        let lock = NSLock()
        var pending: [ClosedRange<UInt64>]
        var ledger = SweepLedger()
        let total: UInt64
        let progress: Bool
        let started = Date()
        var reported = 0

        init(pending: [ClosedRange<UInt64>], total: UInt64, progress: Bool) {
            self.pending = pending
            self.total = total
            self.progress = progress
        }

        func next() -> ClosedRange<UInt64>? {
            lock.lock(); defer { lock.unlock() }
            return pending.popLast()
        }

        func record(_ seeds: ClosedRange<UInt64>, _ output: String, _ normal: Bool, _ how: String) {
            lock.lock(); defer { lock.unlock() }
            if let rest = ledger.record(seeds: seeds, output: output, exitedNormally: normal, how: how) { pending.append(rest) }
            if progress { report() }
        }

        /// One line on standard error, rewritten in place; a failure gets a line of its own.
        private func report() {
            var text = ""
            for f in ledger.failures.dropFirst(reported) { text += "\r\u{1B}[K\(f.text)\n" }
            reported = ledger.failures.count
            let done = ledger.finished
            let seconds = max(Date().timeIntervalSince(started), 0.001)
            let perMinute = Double(done) / seconds * 60
            let left = perMinute > 0 ? Double(total - min(done, total)) / perMinute * 60 : 0
            text += "\r\u{1B}[K\(done)/\(total) seeds, \(Int(perMinute))/min, \(Int(left) / 60) min \(Int(left) % 60) s left, "
                + "\(ledger.failures.count) failed"
            if done >= total { text += "\n" }
            FileHandle.standardError.write(Data(text.utf8))
        }

        func compareHashOrder(_ seeds: ClosedRange<UInt64>, _ output: String) {
            lock.lock(); defer { lock.unlock() }
            ledger.compareHashOrder(seeds: seeds, output: output)
        }
    }
}
