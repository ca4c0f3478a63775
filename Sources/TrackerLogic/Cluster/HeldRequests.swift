import NIOCore

/// Peer requests a node received while it was not serving, held so that a new master can
/// answer the ones nobody answered once it serves.
///
/// Why: every node receives every request (group and shared-address modes), but only the
/// master answers. Requests that arrive after the master died and before its successor
/// serves were answered by no one, and real clients pay far more than the election for
/// that: libtorrent retries a lost connect after ~40 s, Transmission 3.00 not for minutes.
/// The spec's rule still holds — nothing is answered *during* the election; the new master
/// answers afterwards, through the normal path (an announce through two-phase commit).
///
/// What was answered already is judged from what this node heard from a serving master:
/// a connect is answered the moment the master receives it, so any message a serving master
/// sent after the request arrived here shows it was alive to answer it; an announce is
/// answered when its transaction commits, so only a COMMIT or ABORT heard after it does —
/// unless it is one the master refuses at once (the access policy, a bad connection id,
/// a full swarm), which is judged like a connect (`takeUnanswered`'s `answeredAtOnce`).
/// Whatever changed the refusal between the two masters' decisions was a commit heard
/// here, which covers the request either way.
/// A request that a master received but had not yet put in a transaction when it died is
/// the one case this misses (a window of one batch delay); the client retransmits.
///
/// A node's own serving is no evidence: it holds nothing while it serves and empties the
/// ring as it comes to serve, so whatever it holds it read after it last served, and did
/// not answer, even when read in the very millisecond it stopped — or took to answer and
/// held again when its office ended first, judged then (`Request.judgedUnansweredAt`).
///
/// The order in which a node reads its two sockets is not the order in which the bytes
/// arrived, two ways:
/// - after a pause too short to notice (a process stopped right after its start, while
///   it expected no wake for seconds, or for under half a keepalive interval), the
///   broker's backlog, with the COMMIT that answered a request, is read before the peer
///   socket's, with the request, a few milliseconds later; a node that came to serve
///   would answer it a second time. A backlog is read in one run of steps with no wait
///   between them, so
///   evidence read earlier in the same run covers requests read up to `drain` after it
///   (`ClusterConfig.backlogDrain`). A node that waited between the two (its sockets
///   were empty) read the request after the evidence arrived: not covered — else a
///   client whose first request lands just after the dead master's last message waits
///   for its own retry (BEP 15: 15 s).
/// - a peer's datagram may take longer to this node than the master's whole round of
///   two-phase commit: evidence covers what was read up to `skew` after it, always
///   (`ClusterConfig.receiveSkew`, the spread of the network's delays).
/// A request that truly arrived in either span goes unanswered by the next master, and
/// its client retransmits.
///
/// Bounded: only connects and announces (scrapes are cheap to resend and change nothing),
/// at most `capacity` of them, none older than `window`; the oldest go first. A client
/// retransmitting the same request (same source and transaction id) is answered once.
///
/// Cheap to hold: a node of a group holds every request the master answers, so holding
/// allocates nothing per request. A request's bytes go into its ring slot's share of one
/// byte array (`inlineBytes` each, enough for any connect or announce without options);
/// only a longer one keeps a copy of its own: a buffer allocated per request, and freed
/// as the ring overwrote it, was a measurable share of a follower's CPU.
///
/// ## The contract: every part of the rule is here
///
/// The node calls these at named points of a step, and nothing else reads or writes
/// what is held; a host only performs the actions the node returns
/// (`NodeAction.readPeers`, `.discardPeerBacklog`) and never re-derives the rule:
/// - not serving, a peer's datagram arrives: `hold`;
/// - a serving master is heard (a keepalive in sync, a PREPARE, a COMMIT, an ABORT):
///   `heard(servingMaster:)`; this node commits as master: `committedAsMaster`;
/// - the broker carries this node's keepalive back after a silence: `brokerHeardAgain`;
/// - the node comes to serve: `takeToAnswer`, which keeps what it took as `taken`; each
///   reply or decided drop settles one (`settle`); a commit this node missed voids them
///   (`forgetTaken`);
/// - the office ends: `officeEnded` holds the unsettled taken requests again, or drops
///   everything when the node wakes from a pause already out of office; a node that
///   stops serving marks the moment (`stoppedServing`);
/// - a pause is discounted: `pauseDiscounted` (the socket backlog was another's to answer);
/// - a slave asks whether it may leave peer datagrams unread: `peersUnneeded(isHeir:)`.
///
/// The simulator's checker keeps its own model of what each node heard and read
/// (`HeardServing`, `Invariants`): an oracle, deliberately written apart from this file,
/// so that a wrong rule here fails a seed instead of agreeing with itself.
struct HeldRequests: Sendable {
    struct Request: Sendable, Equatable {
        var datagram: ByteBuffer
        var source: PeerEndpoint
        var receivedAt: Instant
        var isConnect: Bool
        var transactionID: UInt32
        /// When the run of steps it was read in began (the node last waited).
        var runStart: Instant
        /// When this node last judged it unanswered and took it to answer, for a request
        /// held again because the office ended first (`TrackerNode.stepDown`); nil for
        /// one as read.
        var judgedUnansweredAt: Instant? = nil
    }

    /// What this node last heard from a serving master (or did itself while serving).
    struct Evidence: Sendable, Equatable {
        /// Any message of a serving master: connects received before it were answered.
        var alive = Instant(milliseconds: .min)
        /// Its last COMMIT or ABORT: announces received before it were answered.
        var decided = Instant(milliseconds: .min)
        /// The last transaction a serving master was heard to have committed. Learning of
        /// a later one from anything but its COMMIT (a keepalive, the `previous` of a
        /// PREPARE) means a decision this node did not see as it happened: it counts as
        /// decided now. Without this, a master that led a strict minority for 9 s
        /// answered, once the partition healed and it recovered, announces the majority's
        /// master had answered, and applied them over newer state.
        var committed = TxRef.zero
        /// Before this instant this node could not hear the broker (no echo of its own
        /// keepalives for `downAfter`, or none yet): a COMMIT or ABORT may have passed it
        /// by. An ABORT leaves no trace elsewhere (a keepalive reports commits only), so a
        /// request read before it is judged by `alive`: a serving master heard after it
        /// was alive to answer it, and the request counts as answered. Without this, an
        /// heir whose link was reconnecting answered again requests its master had
        /// refused (the nemesis found it). The cost: such a request its master
        /// never decided, the master lost right after, goes unanswered; its client retries.
        var deafUntil = Instant(milliseconds: .min)

        /// Evidence only grows: a later message never makes an answered request look
        /// unanswered again.
        mutating func raise(alive: Instant, decided: Instant? = nil) {
            self.alive = max(self.alive, alive)
            if let decided { self.decided = max(self.decided, decided) }
        }

        /// A serving master said, at `now`, that it has committed `ref`; this node holds
        /// `holding` (what it applied it learned of as it applied it).
        mutating func heard(committed ref: TxRef, at now: Instant, holding: TxRef) {
            guard ref > committed else { return }
            committed = ref
            if ref > holding { raise(alive: now, decided: now) }
        }
    }

    let capacity: Int
    let window: Milliseconds
    /// How much later than the evidence that answered it a request may be read: always,
    /// and within one run of steps.
    let skew: Milliseconds
    let drain: Milliseconds
    /// A held request as the ring keeps it: its bytes are in `bytes` at its slot's
    /// offset, or in `overflow` when longer than `inlineBytes`.
    private struct Entry: Sendable {
        var length: Int
        var overflow: ByteBuffer?
        var source: PeerEndpoint
        var receivedAt: Instant
        var isConnect: Bool
        var transactionID: UInt32
        var runStart: Instant
        var judgedUnansweredAt: Instant?
    }

    /// A ring: `slots[head]` is the oldest of `count` entries; slot `i`'s bytes are
    /// `bytes[i * inlineBytes ..< i * inlineBytes + length]` unless it overflowed.
    private var slots: [Entry] = []
    private var bytes: [UInt8] = []
    private var head = 0
    private(set) var count = 0
    private(set) var evidence = Evidence()
    /// Held requests this node took to answer as it came to serve (`takeToAnswer`) whose
    /// answer has not gone out yet. Every node's copy of them is gone (each node that
    /// served took its own), so if the office ends first they are held again
    /// (`officeEnded`): else no master would answer them, and a client that sent once
    /// waits for its retransmission.
    private(set) var taken: [Request] = []
    /// Nothing arriving before this is held: a paused master's socket backlog, which
    /// another master served (`discountPause`). Kept apart from `evidence`, which says
    /// only what was heard of serving masters.
    private var ignoredUntil = Instant(milliseconds: .min)

    /// A held datagram is at most this long: an announce with BEP 41 options fits; a
    /// larger one is not a request a client waits on.
    static let maxDatagram = 1024
    /// Bytes of a slot: an announce without BEP 41 options is 98.
    static let inlineBytes = 128

    init(capacity: Int, window: Milliseconds, skew: Milliseconds = Milliseconds(0), drain: Milliseconds = Milliseconds(0)) {
        self.capacity = max(capacity, 0)
        self.window = window
        self.skew = Milliseconds(max(skew.value, 0))
        self.drain = Milliseconds(max(drain.value, 0))
    }

    /// Keeps a connect or announce (anything else, or anything malformed, is ignored: the
    /// handler would drop it anyway).
    /// `judgedUnansweredAt`: the node took it to answer at that instant (see `Request`).
    mutating func hold(_ datagram: ByteBuffer, from source: PeerEndpoint, now: Instant, runStart: Instant,
                       judgedUnansweredAt: Instant? = nil) {
        guard capacity > 0, now >= ignoredUntil, datagram.readableBytes <= Self.maxDatagram,
              let header = BEP15Codec.peekHeader(datagram) else { return }
        let isConnect: Bool
        switch header.action {
        case .connect: guard header.connectionID == bep15ProtocolID else { return }; isConnect = true
        case .announce: guard datagram.readableBytes >= BEP15Codec.announceRequestSize else { return }; isConnect = false
        case .scrape, .error, nil: return
        }
        dropExpired(now)
        if count == capacity { removeOldest() }
        if count == slots.count { grow() }
        // Copied: the runtime's receive buffer is not ours to keep.
        let slot = (head + count) % slots.count
        let length = datagram.readableBytes
        var entry = Entry(length: length, overflow: nil, source: source, receivedAt: now, isConnect: isConnect,
                          transactionID: header.transactionID, runStart: runStart, judgedUnansweredAt: judgedUnansweredAt)
        if length <= Self.inlineBytes {
            let offset = slot * Self.inlineBytes
            bytes.withUnsafeMutableBytes { ring in
                datagram.withUnsafeReadableBytes { source in
                    ring[offset ..< offset + length].copyBytes(from: source)
                }
            }
        } else {
            entry.overflow = ByteBuffer(bytes: datagram.readableBytesView)
        }
        slots[slot] = entry
        count += 1
    }

    /// The request in slot `slot`, its bytes in a buffer of their own.
    private func request(at slot: Int) -> Request {
        let e = slots[slot]
        let datagram = e.overflow ?? ByteBuffer(bytes: bytes[slot * Self.inlineBytes ..< slot * Self.inlineBytes + e.length])
        return Request(datagram: datagram, source: e.source, receivedAt: e.receivedAt, isConnect: e.isConnect,
                       transactionID: e.transactionID, runStart: e.runStart, judgedUnansweredAt: e.judgedUnansweredAt)
    }

    /// The ring doubles up to `capacity` as requests come: most nodes hold a few between
    /// two elections, and allocating the whole ring at the first one (4,096 entries by
    /// default) cost the simulator more than holding them.
    private mutating func grow() {
        let size = min(max(slots.count * 2, 16), capacity)
        var bigger: [Entry] = []
        bigger.reserveCapacity(size)
        var biggerBytes = [UInt8](repeating: 0, count: size * Self.inlineBytes)
        for i in 0..<count {
            let slot = (head + i) % slots.count
            bigger.append(slots[slot])
            let from = slot * Self.inlineBytes, to = i * Self.inlineBytes
            biggerBytes[to ..< to + Self.inlineBytes] = bytes[from ..< from + Self.inlineBytes]
        }
        let empty = Entry(length: 0, overflow: nil, source: PeerEndpoint(ip: .v4(0), port: 0), receivedAt: Instant(milliseconds: 0),
                          isConnect: false, transactionID: 0, runStart: Instant(milliseconds: 0), judgedUnansweredAt: nil)
        bigger.append(contentsOf: repeatElement(empty, count: size - count))
        slots = bigger
        bytes = biggerBytes
        head = 0
    }

    /// The requests no serving master can have answered and a client may still wait on,
    /// oldest first, each (source, transaction id) once, stamped as judged unanswered
    /// `now`; the store is emptied. `answeredAtOnce` says which held announces a master
    /// answers without a commit.
    ///
    /// A request this node judged unanswered before, and held again when its office ended,
    /// is judged only by evidence heard since: what came before was weighed then. Judged
    /// afresh, a node that had turned deaf to the broker meanwhile judged it by aliveness
    /// from before its first judgement and dropped it, though nobody had answered it.
    ///
    /// Of a request held more than once (its client sent it again), the latest unanswered
    /// copy is taken: its window runs from when the client last sent it. Taken by its
    /// first copy, a request held again at the end of an office expired with that copy
    /// while its client's last send was still young.
    private mutating func takeUnanswered(now: Instant, answeredAtOnce: (Request) -> Bool) -> [Request] {
        var out: [Request] = []
        var taken: [Key: Int] = [:]
        for i in 0..<count {
            let slot = (head + i) % slots.count
            guard now - slots[slot].receivedAt <= window else { continue }
            var r = request(at: slot)
            let heard = r.isConnect || answeredAtOnce(r) || r.receivedAt < evidence.deafUntil ? evidence.alive : evidence.decided
            if let judged = r.judgedUnansweredAt {
                guard heard <= judged else { continue }
            } else {
                guard r.receivedAt - skew > heard,
                      heard < r.runStart || r.receivedAt - drain > heard else { continue }
            }
            r.judgedUnansweredAt = now
            let key = Key(source: r.source, transactionID: r.transactionID, isConnect: r.isConnect)
            if let i = taken[key] { out[i] = r } else { taken[key] = out.count; out.append(r) }
        }
        removeAll()
        return out
    }

    /// Whether it holds the request of `source` with `transactionID`.
    func holds(source: PeerEndpoint, transactionID: UInt32) -> Bool {
        (0..<count).contains { i in
            let e = slots[(head + i) % slots.count]
            return e.transactionID == transactionID && e.source == source
        }
    }

    private mutating func ignore(until t: Instant) {
        ignoredUntil = max(ignoredUntil, t)
    }

    private mutating func removeAll() {
        slots.removeAll()
        bytes.removeAll()
        head = 0
        count = 0
    }

    // MARK: the rule's entry points

    /// What a serving master said, heard `now` by a node that holds `holding`, shows
    /// which held requests it was alive to answer. Only the master of the message's
    /// epoch counts.
    mutating func heard(servingMaster env: ClusterEnvelope, at now: Instant, holding: TxRef) {
        guard env.from == env.epoch.master else { return }
        switch env.message {
        case .keepalive(let k) where k.role == .master && k.inSync:
            evidence.raise(alive: now)
            evidence.heard(committed: k.lastCommitted, at: now, holding: holding)
        case .prepare(_, let previous, _):
            evidence.raise(alive: now)
            evidence.heard(committed: previous, at: now, holding: holding)
        case .commit(let ref, _):
            evidence.raise(alive: now, decided: now)
            evidence.heard(committed: ref, at: now, holding: holding)
        case .abort:
            evidence.raise(alive: now, decided: now)
        default: break
        }
    }

    /// This node, as master, committed `ref` at `now`: a later one learned of otherwise
    /// is a decision it did not see (`Evidence.committed`).
    mutating func committedAsMaster(_ ref: TxRef, at now: Instant) {
        evidence.heard(committed: ref, at: now, holding: ref)
    }

    /// This node stopped serving at `now`, holding `holding`: what reached it while it
    /// served it answered (or the next master holds it); what it holds from now on it did
    /// not, whenever in this millisecond it is read.
    mutating func stoppedServing(at now: Instant, holding: TxRef) {
        evidence.heard(committed: holding, at: now, holding: holding)
    }

    /// The broker carried this node's own keepalive back at `now` after a silence: what
    /// it carried meanwhile may have passed this node by (`Evidence.deafUntil`).
    mutating func brokerHeardAgain(at now: Instant) {
        evidence.deafUntil = now
    }

    /// The node came to serve at `now`: the requests nobody answered, to answer through
    /// the normal path, each kept in `taken` until `settle`d. `brokerLinked`: whether it
    /// hears the broker now; serving while deaf to it (an outage), nothing held can be
    /// judged by the decisions the broker carries.
    mutating func takeToAnswer(now: Instant, brokerLinked: Bool, answeredAtOnce: (Request) -> Bool) -> [Request] {
        if !brokerLinked { evidence.deafUntil = max(evidence.deafUntil, now) }
        let out = takeUnanswered(now: now, answeredAtOnce: answeredAtOnce)
        taken = Array((taken + out).suffix(capacity))
        return out
    }

    /// A taken request was answered, or the master decided to answer it with nothing (a
    /// dropped request): either way it waits no more, and it is not held again when the
    /// office ends.
    mutating func settle(_ transactionID: UInt32, from peer: PeerEndpoint) {
        guard !taken.isEmpty else { return }
        let ip = peer.ip.unmapped
        taken.removeAll { $0.transactionID == transactionID && $0.source.port == peer.port && $0.source.ip.unmapped == ip }
    }

    /// The commits this node served were replaced by another master's (`MissedCommit`):
    /// what it took goes unanswered with them, and is not held again.
    mutating func forgetTaken() {
        taken = []
    }

    /// The office ended at `now`. The taken requests not answered are held again, as they
    /// arrived. A node that woke from a pause (`pauseBacklogUntil` still ahead) and is
    /// already out of office drops everything, and holds nothing that arrived before
    /// then: that backlog was the newer master's to answer. Returns whether the host must
    /// drop the peer socket's backlog (`NodeAction.discardPeerBacklog`).
    mutating func officeEnded(now: Instant, pauseBacklogUntil: Instant?) -> Bool {
        for r in taken {
            hold(r.datagram, from: r.source, now: r.receivedAt, runStart: r.runStart, judgedUnansweredAt: r.judgedUnansweredAt)
        }
        taken = []
        guard let until = pauseBacklogUntil, now < until else { return false }
        removeAll()
        ignore(until: until)
        return true
    }

    /// A pause was discounted (`TrackerNode.discountPause`): whatever was held, and the
    /// socket backlog read up to `until`, another master answered (or it is too old).
    mutating func pauseDiscounted(until: Instant) {
        removeAll()
        ignore(until: until)
    }

    /// Until when a slave may leave peer datagrams unread (nil: it must read them).
    /// `isHeir`: it would succeed its master (the highest live id that could lead but the
    /// master's). Any other slave never needs them; the heir needs only those read later
    /// than `skew` after the last decision it heard, since earlier ones count as answered
    /// (`takeUnanswered`). With no decision heard, it reads everything.
    func peersUnneeded(isHeir: Bool) -> Instant? {
        guard isHeir else { return Instant(milliseconds: .max) }
        guard evidence.decided > Instant(milliseconds: .min) else { return nil }
        return evidence.decided + skew
    }

    private struct Key: Hashable {
        var source: PeerEndpoint
        var transactionID: UInt32
        var isConnect: Bool
    }

    private mutating func dropExpired(_ now: Instant) {
        while count > 0, now - slots[head].receivedAt > window { removeOldest() }
    }

    private mutating func removeOldest() {
        guard count > 0 else { return }
        if slots[head].overflow != nil { slots[head].overflow = nil }
        head = (head + 1) % slots.count
        count -= 1
        if count == 0 { head = 0 }
    }
}
