/// A tracker node's id. Unique among live nodes; the bully election makes the highest
/// live id master. 0 means "not assigned yet" (`--id auto` before the master answers).
public struct NodeID: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public init(_ value: UInt32) { self.rawValue = value }

    public static let unassigned = NodeID(0)
    public var isAssigned: Bool { rawValue != 0 }
    public static func < (l: NodeID, r: NodeID) -> Bool { l.rawValue < r.rawValue }
    public var description: String { "n\(rawValue)" }
}

/// A master's reign. Carrying the master's id makes two masters elected in separate
/// partitions distinct even when they counted the same term: at most one master per
/// epoch holds by construction, and the simulator checks it anyway.
public struct Epoch: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var term: UInt32
    public var master: NodeID

    public init(term: UInt32, master: NodeID) { self.term = term; self.master = master }

    public static let zero = Epoch(term: 0, master: .unassigned)

    public static func < (l: Epoch, r: Epoch) -> Bool { (l.term, l.master) < (r.term, r.master) }

    /// The highest term a node accepts or claims. A term at the top of the range cannot be
    /// succeeded, so it is refused wherever it is decoded, never incremented.
    public static let maxTerm: UInt32 = UInt32.max - 1

    /// The next epoch a candidate claims: above everything it has seen. Nil once the term
    /// space is exhausted (only a forged or corrupt epoch can get there).
    public func successor(for node: NodeID) -> Epoch? {
        guard term < Self.maxTerm, node.isAssigned else { return nil }
        return Epoch(term: term + 1, master: node)
    }

    /// Whether a node may hold this epoch: zero, or a term in range with a master named.
    /// Anything else on the wire or on disk is corrupt or forged.
    public var isWellFormed: Bool {
        self == .zero || (term > 0 && term <= Self.maxTerm && master.isAssigned)
    }

    public var packed: UInt64 { UInt64(term) << 32 | UInt64(master.rawValue) }
    public init(packed: UInt64) { self.init(term: UInt32(packed >> 32), master: NodeID(UInt32(truncatingIfNeeded: packed))) }

    public var description: String { "e\(term).\(master.rawValue)" }
}

/// Names one committed transaction: the epoch whose master created it and its position
/// in the single, gap-free sequence every replica applies.
public struct TxRef: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var epoch: Epoch
    public var txid: UInt64

    public init(epoch: Epoch, txid: UInt64) { self.epoch = epoch; self.txid = txid }

    public static let zero = TxRef(epoch: .zero, txid: 0)

    /// Later epoch first, then longer: the most up-to-date replica sorts last.
    public static func < (l: TxRef, r: TxRef) -> Bool { (l.epoch, l.txid) < (r.epoch, r.txid) }

    public var description: String { "\(epoch)#\(txid)" }

    /// The highest txid a node accepts: far beyond any real history, and low enough that
    /// `txid + 1` can never overflow.
    public static let maxTxid: UInt64 = 1 << 62

    /// A well-formed epoch, and the zero ref exactly when the epoch is zero.
    public var isWellFormed: Bool {
        epoch.isWellFormed && txid <= Self.maxTxid && (epoch == .zero) == (txid == 0)
    }
}

/// A batch of repository updates that commits or aborts as a whole (group commit).
public struct Transaction: Hashable, Sendable {
    public let ref: TxRef
    public let updates: [SwarmUpdate]
    /// Identifies the content, so a replica that prepared one version of a txid never
    /// commits it when the master committed another (an aborted prepare whose ABORT was lost).
    /// Computed once: votes, commits and aborts compare it, each of them a pass over the
    /// batch otherwise.
    public let digest: UInt64

    public init(ref: TxRef, updates: [SwarmUpdate]) {
        self.ref = ref
        self.updates = updates
        var d = Digest()
        d.add(ref.epoch.packed, ref.txid, UInt64(updates.count))
        for u in updates { d.add(u) }
        digest = d.value
    }

    public var txid: UInt64 { ref.txid }
}

/// What a node is doing in the cluster.
public enum Role: UInt8, Hashable, Sendable, CustomStringConvertible {
    /// Listening before taking part: learns the master, epochs and whether its id is taken.
    case starting = 0
    /// Following a master (maybe still catching up).
    case slave = 1
    /// Running a bully election.
    case candidate = 2
    case master = 3
    /// Left cleanly or refused; does nothing more.
    case stopped = 4

    public var description: String {
        switch self {
        case .starting: return "starting"
        case .slave: return "slave"
        case .candidate: return "candidate"
        case .master: return "master"
        case .stopped: return "stopped"
        }
    }
}

/// How many OK votes make a transaction commit.
public enum QuorumMode: String, Hashable, Sendable, CaseIterable {
    /// A majority of the nodes the master sees alive (the spec): a lone survivor serves on.
    case live
    /// A majority of the configured cluster size: too few survivors halt commits, and peers
    /// get errors rather than acknowledgements a later failure could lose.
    case strict
}
