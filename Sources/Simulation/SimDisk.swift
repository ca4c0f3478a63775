import TrackerLogic

/// Disk of a simulated node: the repository's rows (`RepositoryRows`), changed by exactly
/// the writes the node asks for, as the runtime's SQLite file is. A restart reads back what
/// the rows say, not the transactions the node committed. Survives crashes, fails on
/// demand, and (a disk-loss fault) loses what a crash may take.
struct SimDisk {
    /// The rows no crash can take any more.
    var settled = RepositoryRows()
    /// The newest commits' rows, the ones a crash may lose, oldest first.
    var recent: [CommitRows] = []
    var epoch = Epoch.zero
    /// What a clean stop kept of the operator's data: survives the wipe that follows, as
    /// the runtime's kept table does, but not the loss of the file.
    var kept: [KeptEntry] = []
    /// A diverged repository's offer set aside (`NodeAction.setAside`): survives a wipe
    /// and a crash, not the loss of the file.
    var setAside: [MergeOffer] = []
    var failing = false

    var lastTxid: UInt64 { recent.last?.lastCommitted.txid ?? settled.lastCommitted.txid }

    /// What a restart reads.
    func durable() -> DurableState {
        var rows = settled
        for r in recent { rows.apply(r) }
        return DurableState(snapshot: rows.snapshot, epoch: epoch, kept: kept, setAside: setAside)
    }

    mutating func write(_ rows: CommitRows) {
        recent.append(rows)
        if recent.count > 512 {
            for r in recent { settled.apply(r) }
            recent = []
        }
    }

    /// `PeerImage`'s invariant: the image is of the commit the disk holds last, and it
    /// holds exactly the disk's peers (the runtime writes its peer rows from it). It
    /// changes no row, and settles nothing: a crash may still take the commits before it,
    /// queued with it in the runtime's writer.
    func holds(_ image: PeerImage) -> Bool {
        var rows = settled
        for r in recent { rows.apply(r) }
        guard rows.lastCommitted == image.lastCommitted else { return false }
        var peers: [InfoHash: [PeerKey: PeerRecord]] = [:]
        for swarm in image.store.content() where !swarm.peers.isEmpty {
            peers[swarm.infoHash] = Dictionary(swarm.peers.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        }
        return rows.peers == peers
    }

    mutating func replace(with snapshot: Snapshot) {
        settled.replace(with: snapshot)
        recent = []
    }

    mutating func wipe() {
        settled.wipe()
        recent = []
    }

    /// What a crash takes within the runtime's write policy: transactions are written
    /// after the vote, by a writer thread, so a killed process loses the commits still
    /// queued (`lastWrites` of them, the newest), or — a repository file lost or replaced —
    /// all of them (`lastWrites == 0`). The epoch survives: a candidate leads only once
    /// its epoch write is done, and emptying a repository keeps it, as the runtime does.
    mutating func lose(lastWrites: Int) {
        if lastWrites <= 0 {
            wipe()
            kept = []
            setAside = []
        } else {
            recent.removeLast(min(lastWrites, recent.count))
        }
    }
}

extension Simulator {
    /// Performs a store action on the slot's disk and reports back what the node hears,
    /// by the rule both hosts share (`StoreWrite.outcome`).
    mutating func performStore(_ write: StoreWrite, from slot: Int) {
        let ok = !slots[slot].disk.failing
        if ok {
            switch write {
            case .commit(let rows):
                guard rows.lastCommitted.txid == slots[slot].disk.lastTxid + 1 else {
                    return fail("s\(slot) persisted \(rows.lastCommitted) after \(slots[slot].disk.lastTxid): a gap on disk")
                }
                slots[slot].disk.write(rows)
            case .snapshot(let s):
                slots[slot].disk.replace(with: s)
            case .peerImage(let image):
                guard slots[slot].disk.holds(image) else {
                    return fail("s\(slot) handed its disk a peer image of \(image.lastCommitted) that is not what the disk holds")
                }
                coverage.count(.peerImageWritten)
            case .epoch(let e):
                slots[slot].disk.epoch = max(slots[slot].disk.epoch, e)
            case .wipe:
                slots[slot].generation += 1
                if !slots[slot].keptForWipe { slots[slot].operatorGeneration += 1 }
                slots[slot].keptForWipe = false
                slots[slot].disk.wipe()
            case .keep(let entries):
                slots[slot].disk.kept = entries
                slots[slot].keptForWipe = true
            case .dropKept:
                slots[slot].disk.kept = []
            case .setAside(let parts):
                slots[slot].disk.setAside = parts
            case .probe:
                break
            }
        }
        // As in the runtime, a failing disk loses every write, the epoch's too.
        guard let event = write.outcome(ok: ok, detail: ok ? "" : "disk failure"),
              let incarnation = slots[slot].inspect({ $0.incarnation }) else { return }
        queue.push(now, .store(slot, incarnation, event))
    }

    /// A crash that takes the disk's newest writes (or all of them) with it.
    mutating func crashLosingWrites(_ slot: Int, lastWrites: Int) {
        guard slots[slot].isRunning else { return }
        apply(.crash(slot))
        let before = slots[slot].disk.lastTxid
        slots[slot].disk.lose(lastWrites: lastWrites)
        if slots[slot].disk.lastTxid < before || lastWrites <= 0 {
            slots[slot].generation += 1
            slots[slot].operatorGeneration += 1
        }
        slots[slot].rejoining = true
        coverage.count(.diskLost)
    }
}
