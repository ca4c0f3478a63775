import TrackerLogic

/// Disk of a simulated node: survives crashes, fails on demand, and (a disk-loss fault)
/// loses what a crash may take.
struct SimDisk {
    var base: Snapshot?
    var txs: [Transaction] = []
    var epoch = Epoch.zero
    var failing = false

    var lastTxid: UInt64 { txs.last?.txid ?? base?.lastCommitted.txid ?? 0 }

    func durable() -> DurableState {
        guard base != nil || !txs.isEmpty else { return DurableState(snapshot: nil, epoch: epoch) }
        var replica = Replica()
        if let b = base { replica.install(b) }
        for tx in txs { replica.commit(tx) }
        return DurableState(snapshot: replica.snapshot(), epoch: epoch)
    }

    /// What a crash takes within the runtime's write policy: transactions are written
    /// after the vote, by a writer thread, so a killed process loses the commits still
    /// queued (`lastWrites` of them, the newest), or — a repository file lost or replaced —
    /// all of them (`lastWrites == 0`). The epoch survives: a candidate leads only once
    /// its epoch write is done, and emptying a repository keeps it, as the runtime does.
    mutating func lose(lastWrites: Int) {
        if lastWrites <= 0 {
            base = nil
            txs = []
        } else {
            txs.removeLast(min(lastWrites, txs.count))
        }
    }
}

extension Simulator {
    /// Performs a store action on the slot's disk and reports back what the node hears,
    /// by the rule both hosts share (`NodeAction.storeOutcome`).
    mutating func performStore(_ action: NodeAction, from slot: Int) {
        let ok = !slots[slot].disk.failing
        if ok {
            switch action {
            case .persist(let tx):
                guard tx.txid == slots[slot].disk.lastTxid + 1 else {
                    return fail("s\(slot) persisted \(tx.ref) after \(slots[slot].disk.lastTxid): a gap on disk")
                }
                slots[slot].disk.txs.append(tx)
                if slots[slot].disk.txs.count > 512 {
                    slots[slot].disk.base = slots[slot].disk.durable().snapshot
                    slots[slot].disk.txs = []
                }
            case .persistSnapshot(let s):
                slots[slot].disk.base = s
                slots[slot].disk.txs = []
            case .persistEpoch(let e):
                slots[slot].disk.epoch = max(slots[slot].disk.epoch, e)
            case .wipeStore:
                slots[slot].generation += 1
                slots[slot].disk.base = nil
                slots[slot].disk.txs = []
            default:
                break
            }
        }
        // As in the runtime, a failing disk loses every write, the epoch's too.
        guard let event = action.storeOutcome(ok: ok, detail: ok ? "" : "disk failure"),
              let incarnation = slots[slot].inspect({ $0.incarnation }) else { return }
        queue.push(now, .store(slot, incarnation, event))
    }

    /// A crash that takes the disk's newest writes (or all of them) with it.
    mutating func crashLosingWrites(_ slot: Int, lastWrites: Int) {
        guard slots[slot].isRunning else { return }
        apply(.crash(slot))
        let before = slots[slot].disk.lastTxid
        slots[slot].disk.lose(lastWrites: lastWrites)
        if slots[slot].disk.lastTxid < before || lastWrites <= 0 { slots[slot].generation += 1 }
        slots[slot].rejoining = true
        coverage.count(.diskLost)
    }
}
