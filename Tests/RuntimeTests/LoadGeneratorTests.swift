#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import NIOCore
import Testing
import TrackerLogic
import TrackerRuntime
import TrackerTools

/// `tracker bench`'s generator: what it counts is what its target answered, and a target
/// that never answers ends the run instead of hanging it.
@Suite struct LoadGeneratorTests {
    /// A target on loopback that answers through `answer` until stopped.
    private func serving(_ answer: @escaping @Sendable (TrackerRequest) -> TrackerResponse?) throws -> (BatchedUDPSocket, PeerEndpoint, DispatchSemaphore) {
        let server = try BatchedUDPSocket(binding: try #require(PeerEndpoint("127.0.0.1:0")), reusePort: false)
        let done = serveOnAThreadOfItsOwn(server) { batch in
            for (slot, bytes, _) in batch.requests {
                guard case .success(let request) = BEP15Codec.decodeRequest(bytes), let reply = answer(request) else { continue }
                batch.replies.append((slot, reply))
            }
        }
        return (server, try #require(server.localEndpoint), done)
    }

    @Test func countsAnsweredRequestsApartFromErrorRepliesAndRepliesOfTheWrongKind() async throws {
        // Announces answered with their own action; every third answered with an error,
        // every fifth with a scrape's reply (the wrong kind); scrapes answered as scrapes.
        let (server, address, done) = try serving { request in
            switch request {
            case .connect(let r):
                return .connect(ConnectResponse(transactionID: r.transactionID, connectionID: 42))
            case .announce(let r) where r.connectionID == 42:
                let n = r.transactionID & 0xFFFF
                if n % 3 == 0 { return .error(ErrorResponse(transactionID: r.transactionID, message: "no")) }
                if n % 5 == 0 { return .scrape(ScrapeResponse(transactionID: r.transactionID, entries: [])) }
                return .announce(AnnounceResponse(transactionID: r.transactionID, interval: 60, leechers: 1, seeders: 0,
                                                  peers: [PeerEndpoint(ip: .v4(0x0A00_0001), port: 6881)]))
            case .scrape(let r) where r.connectionID == 42:
                return .scrape(ScrapeResponse(transactionID: r.transactionID,
                                              entries: r.infoHashes.map { _ in ScrapeEntry(seeders: 0, completed: 0, leechers: 0) }))
            default:
                return nil
            }
        }
        defer { server.stop(); done.wait(); server.close() }
        var config = BenchConfig(target: address, duration: .milliseconds(600), torrents: 50, concurrency: 16)
        config.sockets = 2
        config.scrapeEvery = 7
        let result = try await LoadGenerator.run(config)
        #expect(result.responses > 100)
        #expect(result.errorReplies > 0)
        #expect(result.invalidReplies > 0)
        // The connect of each socket, every request answered, each one resent after a
        // timeout (none on an idle machine; the tests share two cores), and at most the
        // concurrency in flight when the window closed.
        let answered = result.responses + result.errorReplies + result.invalidReplies
        #expect(result.sent >= answered + 2)
        #expect(result.sent <= answered + 2 + result.timeouts + 16)
        // Six requests in seven are announces (a slot's transaction ids count its requests):
        // a third of those are errors (2/7 of all), a fifth but not a third invalid (4/35).
        #expect(abs(Double(result.errorReplies) / Double(answered) - 2.0 / 7) < 0.05)
        #expect(abs(Double(result.invalidReplies) / Double(answered) - 4.0 / 35) < 0.05)
        // Not bounded tightly above: the wall clock of a loaded machine says little.
        #expect(result.seconds >= 0.6 && result.seconds < 10)
    }

    @Test func aTargetThatNeverAnswersEndsTheRunAfterItsDurationAndATimeout() async throws {
        let (server, address, done) = try serving { _ in nil }
        defer { server.stop(); done.wait(); server.close() }
        var config = BenchConfig(target: address, duration: .milliseconds(300), torrents: 10, concurrency: 4)
        config.timeout = .milliseconds(200)
        let result = try await LoadGenerator.run(config)
        // A connect every timeout until the duration and one timeout have passed: two
        // resent (the wall clock is not asked: an awaiting test resumes only when the
        // suite's cooperative threads are free).
        #expect(result.responses == 0 && result.seconds == 0)
        #expect((1...4).contains(result.timeouts))
        #expect(result.sent == result.timeouts + 1)
    }
}
