import Testing
import TrackerLogic

@Suite("Dashboard listings")
struct DashboardListingTests {
    func row(_ hex: Character, name: String? = nil, size: Int64? = nil, seeders: Int = 0, peers: Int = 0) -> SwarmRow {
        SwarmRow(infoHash: String(repeating: hex, count: 40), name: name, size: size, seeders: seeders, leechers: peers - seeders,
                 completed: 0, peers: peers)
    }

    @Test func queryParametersParseOrNameTheBadOne() throws {
        #expect(try SwarmQuery(parameters: [:]) == SwarmQuery())
        #expect(try SwarmQuery(parameters: ["query": "  ubuntu ", "sort": "-size", "page": "3", "size": "20", "_": "123"])
            == SwarmQuery(text: "ubuntu", sort: .size, descending: true, page: 3, pageSize: 20))
        #expect(try SwarmQuery(parameters: ["sort": "name"]).descending == false)
        #expect(throws: QueryError("sort: one of name, size, seeders, leechers, completed, peers, '-' first for descending")) {
            try SwarmQuery(parameters: ["sort": "rm -rf"])
        }
        #expect(throws: QueryError("page: a whole number from 1 to 1000000000")) { try SwarmQuery(parameters: ["page": "0"]) }
        #expect(throws: QueryError("size: a whole number from 1 to 500")) { try SwarmQuery(parameters: ["size": "99999999999999999999"]) }
        #expect(throws: QueryError("query: at most 200 characters")) {
            try SwarmQuery(parameters: ["query": String(repeating: "x", count: 201)])
        }
    }

    @Test func searchMatchesNameOrHashCaseInsensitively() {
        let rows = [row("a", name: "Debian ISO"), row("b"), row("c", name: "Arch")]
        #expect(SwarmListing.page(rows, SwarmQuery(text: "debian")).rows.map(\.name) == ["Debian ISO"])
        #expect(SwarmListing.page(rows, SwarmQuery(text: "bbbb")).rows.map(\.infoHash) == [String(repeating: "b", count: 40)])
        #expect(SwarmListing.page(rows, SwarmQuery(text: "nothing")).total == 0)
    }

    @Test func sortingIsTotalAndNamedSwarmsComeFirst() {
        let rows = [row("c", peers: 5), row("a", name: "zeta", peers: 5), row("b", name: "Alpha", peers: 9)]
        #expect(SwarmListing.page(rows, SwarmQuery(sort: .peers, descending: true)).rows.map(\.infoHash.first)
            == ["b", "a", "c"])  // ties by hash
        #expect(SwarmListing.page(rows, SwarmQuery(sort: .name, descending: false)).rows.map(\.name) == ["Alpha", "zeta", nil])
    }

    @Test func pagesCoverEveryRowOnceAndAPagePastTheEndIsEmpty() {
        let rows = (0..<95).map { i in
            SwarmRow(infoHash: String(i, radix: 16).leftPadded(to: 40), name: nil, size: nil, seeders: i % 7, leechers: 0,
                     completed: 0, peers: i % 7)
        }
        var seen: [String] = []
        for page in 1...10 {
            let p = SwarmListing.page(rows, SwarmQuery(sort: .seeders, page: page, pageSize: 10))
            #expect(p.total == 95 && p.pages == 10)
            seen += p.rows.map(\.infoHash)
        }
        #expect(Set(seen).count == 95 && seen.count == 95)
        #expect(SwarmListing.page(rows, SwarmQuery(page: 11, pageSize: 10)).rows.isEmpty)
        #expect(ListPage(slicing: [1, 2, 3], page: Int.max, pageSize: Int.max).rows.isEmpty)
    }

    @Test func peerRowsAreNewestFirstAndCarryTheirNumbers() throws {
        var store = SwarmStore()
        for (i, at) in [(1, 10), (2, 30), (3, 20)] {
            store.apply(.announce(Announce(infoHash: hashA, peerID: peerID(UInt32(i)), endpoint: PeerEndpoint(ip: v4("10.0.0.\(i)"), port: 6881),
                                           uploaded: 7, downloaded: Int64(i * 100), left: Int64(i), event: .started,
                                           at: Instant(milliseconds: Int64(at) * 1000))))
        }
        let swarm = try #require(store.swarms[hashA])
        let page = PeerRow.page(swarm, now: Instant(milliseconds: 40_000), page: 1, pageSize: 2)
        #expect(page.total == 3 && page.pages == 2)
        #expect(page.rows.map(\.address) == ["10.0.0.2:6881", "10.0.0.3:6881"])
        #expect(page.rows.first?.downloaded == 200 && page.rows.first?.left == 2 && page.rows.first?.lastAnnounceMsAgo == 10_000)
        #expect(page.rows.first?.peerID.hasPrefix("-TT0001-") == true)
    }

    @Test func clientNamesFromPeerIDConventions() {
        func id(_ prefix: String) -> PeerID {
            PeerID(bytes: Array(prefix.utf8) + [UInt8](repeating: 0x41, count: 20 - prefix.utf8.count))!
        }
        #expect(PeerClient.name(of: id("-LT2090-")) == "libtorrent 2.0.9")
        #expect(PeerClient.name(of: id("-TR3000-")) == "Transmission 3.0")
        #expect(PeerClient.name(of: id("-qB4650-")) == "qBittorrent 4.6.5")
        #expect(PeerClient.name(of: id("A2-1-37-0-")) == "aria2 1.37.0")
        #expect(PeerClient.name(of: id("M7-4-3--")) == "BitTorrent (mainline) 7.4.3")
        #expect(PeerClient.name(of: id("-ZZ1000-")) == nil)
        #expect(PeerClient.name(of: id("M7x")) == nil)
        #expect(PeerClient.name(of: PeerID(a: 0, b: 0, c: 0)) == nil)
    }
}

extension String {
    func leftPadded(to n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
}
