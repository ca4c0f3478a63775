import Testing
import TrackerLogic

/// The contract both hosts follow when they perform a node's store actions and exits.
@Suite("Effects contract")
struct EffectsContractTests {
    let epoch = Epoch(term: 4, master: NodeID(2))
    let snapshot = Snapshot(lastCommitted: .zero, history: EpochHistory(), content: [], digest: 0)

    @Test func onlyFailuresEpochsAndProbesAreReportedBack() {
        let tx = Transaction(ref: TxRef(epoch: epoch, txid: 1), updates: [])
        for write: NodeAction in [.persist(tx), .persistSnapshot(snapshot), .wipeStore] {
            #expect(write.storeOutcome(ok: true) == nil, "\(write)")
            #expect(write.storeOutcome(ok: false, detail: "full")?.isStoreFailure == true, "\(write)")
        }
        #expect(NodeAction.persistEpoch(epoch).storeOutcome(ok: true)?.storedEpoch == epoch)
        #expect(NodeAction.persistEpoch(epoch).storeOutcome(ok: false)?.isStoreFailure == true)
        #expect(NodeAction.probeStore.storeOutcome(ok: true)?.isStoreSuccess == true)
        #expect(NodeAction.probeStore.storeOutcome(ok: false)?.isStoreFailure == true)
        #expect(NodeAction.exit(reason: .leftCluster).storeOutcome(ok: false) == nil)
    }

    @Test func onlyLeavingIsACleanExit() {
        #expect(ExitReason.leftCluster.isClean && ExitReason.leftCluster.exitCode == 0)
        #expect(!ExitReason.idInUse(NodeID(3)).isClean && ExitReason.idInUse(NodeID(3)).exitCode == 2)
        #expect(ExitReason.noFreeID.exitCode == 2)
        #expect("\(ExitReason.idInUse(NodeID(3)))".contains("already used"))
    }
}

extension NodeEvent {
    var isStoreFailure: Bool { if case .storeResult(false, _) = self { return true } else { return false } }
    var isStoreSuccess: Bool { if case .storeResult(true, _) = self { return true } else { return false } }
    var storedEpoch: Epoch? { if case .epochStored(let e) = self { return e } else { return nil } }
}
