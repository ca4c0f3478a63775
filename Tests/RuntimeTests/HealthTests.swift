import Testing
import TrackerRuntime

/// `/api/health` decides where keepalived puts the floating address: 200 on the serving
/// master only, and a reason everywhere else.
@Suite struct HealthTests {
    @Test func onlyAServingMasterOrARunningStandaloneNodeIsHealthy() {
        #expect(HealthVerdict(service: "running", role: "master", epoch: "e3.1", master: 3, serving: true).serving)
        #expect(HealthVerdict(service: "running", role: "standalone", epoch: "e0.0", master: 0, serving: true).serving)
        let unhealthy: [(String, String, Bool, String)] = [
            ("running", "master", false, "master of epoch e3.1, still recovering: not serving yet"),
            ("running", "slave", false, "slave of master 3"),
            ("running", "candidate", false, "election in progress"),
            ("running", "starting", false, "starting: joining the cluster"),
            ("stopped", "stopped", false, "the tracker service is stopped"),
            // A provoked failure cuts the node off: a stale `serving` must not keep the address.
            ("failed", "master", true, "a failure was provoked from the dashboard"),
            ("stopped", "master", true, "the tracker service is stopped"),
        ]
        for (service, role, serving, reason) in unhealthy {
            let verdict = HealthVerdict(service: service, role: role, epoch: "e3.1", master: 3, serving: serving)
            #expect(!verdict.serving, "\(service) \(role)")
            #expect(verdict.reason == reason)
        }
    }

    /// A master whose sends the kernel refuses (a firewall rule, a route gone) answers
    /// nobody, whatever it believes: the address must move off it.
    @Test func aNodeThatCannotSendOnThePeerChannelIsNotHealthy() {
        let verdict = HealthVerdict(service: "running", role: "master", epoch: "e3.1", master: 3, serving: true,
                                    peerSendError: "reply: Operation not permitted")
        #expect(!verdict.serving)
        #expect(verdict.reason == "cannot send on the peer channel (reply: Operation not permitted)")
    }
}

/// The interface a group is joined on is checked before anything binds.
@Suite struct NetworkInterfaceTests {
    @Test func loopbackIsUpAndAMissingInterfaceIsNamed() throws {
        #expect(NetworkInterface.problem(named: "lo") == nil)
        let problem = try #require(NetworkInterface.problem(named: "nosuch0"))
        #expect(problem.hasPrefix("no interface named 'nosuch0' on this host (have: "))
        #expect(problem.contains("lo"))
    }
}
