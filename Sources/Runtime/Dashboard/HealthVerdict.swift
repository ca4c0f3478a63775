/// `GET /api/health`: whether this node answers peers now. keepalived's `track_script`
/// and a UDP load balancer's health check both ask it, so that the service address
/// lives only where a reply can come from.
///
/// Invariant: `serving` is true only while the node's own status says it answers peers
/// (a cluster node: the master past recovery; a standalone node: running). Every other
/// state names its reason, so an operator reading a 503 knows what the node waits for.
public struct HealthVerdict: Codable, Sendable, Equatable {
    public var serving: Bool
    public var reason: String

    init(_ s: NodeStatus) {
        self.init(service: s.service, role: s.role, epoch: s.epoch, master: s.master, serving: s.serving,
                  peerSendError: s.peerSendError)
    }

    /// From `/api/node`'s fields of the same names.
    public init(service: String, role: String, epoch: String, master: UInt32, serving: Bool, peerSendError: String? = nil) {
        if let peerSendError, service != "stopped" {
            // Whatever it believes it serves, its answers do not leave.
            self = .init(serving: false, reason: "cannot send on the peer channel (\(peerSendError))")
            return
        }
        switch (service, role) {
        case ("stopped", _):
            self = .init(serving: false, reason: "the tracker service is stopped")
        case ("failed", _):
            self = .init(serving: false, reason: "a failure was provoked from the dashboard")
        case (_, "standalone"):
            self = .init(serving: serving, reason: serving ? "standalone node, serving" : "standalone node, not serving")
        case (_, "master") where serving:
            self = .init(serving: true, reason: "master of epoch \(epoch), serving")
        case (_, "master"):
            self = .init(serving: false, reason: "master of epoch \(epoch), still recovering: not serving yet")
        case (_, "slave"):
            self = .init(serving: false, reason: "slave of master \(master)")
        case (_, "candidate"):
            self = .init(serving: false, reason: "election in progress")
        case (_, "starting"):
            self = .init(serving: false, reason: "starting: joining the cluster")
        default:
            self = .init(serving: false, reason: "not serving (\(role))")
        }
    }

    init(serving: Bool, reason: String) { self.serving = serving; self.reason = reason }
}
