/// The peers of a swarm that reported completion, as a set. Most swarms have none or a
/// few, and a `Set` costs some 200 bytes before its first element; up to `listLimit`
/// keys live in a plain array (found by scanning), beyond that in a `Set`. Completions are
/// never forgotten, so the representation only grows.
public struct CompletedPeers: Sendable, Sequence {
    private enum Storage: Sendable {
        case list([PeerKey])
        case set(Set<PeerKey>)
    }

    private var storage = Storage.list([])

    static var listLimit: Int { 16 }

    public init() {}

    public var count: Int {
        switch storage {
        case .list(let keys): return keys.count
        case .set(let keys): return keys.count
        }
    }

    public var isEmpty: Bool { count == 0 }

    public func contains(_ key: PeerKey) -> Bool {
        switch storage {
        case .list(let keys): return keys.contains(key)
        case .set(let keys): return keys.contains(key)
        }
    }

    /// False when the key was there already.
    @discardableResult
    public mutating func insert(_ key: PeerKey) -> Bool {
        switch storage {
        case .set(var keys):
            storage = .list([])
            let inserted = keys.insert(key).inserted
            storage = .set(keys)
            return inserted
        case .list(var keys):
            guard !keys.contains(key) else { return false }
            storage = .list([])
            if keys.count < Self.listLimit {
                keys.append(key)
                storage = .list(keys)
            } else {
                storage = .set(Set(keys + [key]))
            }
            return true
        }
    }

    public func makeIterator() -> Array<PeerKey>.Iterator {
        switch storage {
        case .list(let keys): return keys.makeIterator()
        case .set(let keys): return Array(keys).makeIterator()
        }
    }
}

extension CompletedPeers: Equatable {
    /// Set equality, whichever way each side happens to hold its keys.
    public static func == (l: CompletedPeers, r: CompletedPeers) -> Bool {
        l.count == r.count && l.allSatisfy(r.contains)
    }
}
