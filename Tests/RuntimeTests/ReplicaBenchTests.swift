import Testing
import TrackerLogic
import TrackerRuntime
import TrackerTools

/// `tracker bench --replica` reports what it measured: every announce went through each
/// stage, in transactions of the size asked for, and the run stops with an error rather
/// than a figure when a PREPARE does not arrive whole or does not commit.
@Suite struct ReplicaBenchTests {
    @Test func everyAnnounceGoesThroughEveryStage() throws {
        let result = try ReplicaBench.run(torrents: 20, peersPerTorrent: 18, announces: 1_000, perTransaction: 64, seed: 7)
        #expect(result.peers == 360)
        #expect(result.announces == 1_000)
        #expect(result.transactions == 16)  // 15 of 64 and one of 40
        // Compact announces of IPv4 peers: 58–74 bytes each, plus the frames' headers.
        #expect(result.bytes > 58 * 1_000 && result.bytes < 80 * 1_000)
        for stage in ReplicaBench.Stage.allCases { #expect(result.cpuSeconds[stage] != nil) }
        #expect(result.json.contains("\"announces\":1000"))
    }

    @Test func aRepositoryWithoutPeersIsAnErrorNotAFigure() {
        #expect(throws: RepositoryError.self) {
            try ReplicaBench.run(torrents: 1, peersPerTorrent: 0, announces: 10, perTransaction: 5, seed: 1)
        }
    }
}
